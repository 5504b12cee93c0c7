/** What a secret is replaced with wherever llmgw shows text that might hold it. */
export const REDACTED = '***';

/**
 * pino's `redact` option for the server's and the agent's loggers: a field that holds an
 * engine key (the wire's `api_key`, the server's `apiKey`), a secret or a bearer header
 * is logged as {@link REDACTED}, however deep a logged object puts it. A safety net:
 * nothing logs these on purpose.
 */
export const LOG_REDACT = {
  paths: [
    'api_key',
    '*.api_key',
    '*.*.api_key',
    '*[*].api_key',
    '*.*[*].api_key',
    'apiKey',
    '*.apiKey',
    '*.*.apiKey',
    '*[*].apiKey',
    'secret',
    '*.secret',
    'authorization',
    '*.authorization',
    '*.headers.authorization',
  ],
  censor: REDACTED,
};

/** `text` with every occurrence of each (non-empty) secret replaced by {@link REDACTED}. */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join(REDACTED);
  return out;
}

/** Query parameters that carry a credential in a signed or tokened URL (S3, Azure SAS, GCS, presigned links). */
const SECRET_PARAM = /^(x-amz-.*|x-goog-.*|sig|signature|token|access_token|key|api_key|apikey|secret|password|pass|auth|credential|sv|se|sp|st|skoid|sktid)$/i;

/**
 * A URL with its credentials replaced by {@link REDACTED}: the userinfo (`user:pass@`) and
 * every query parameter named like a signature, token, key or secret. What is left (the
 * scheme, host, path and other parameters) still says which file it is. Not a URL: as given.
 */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  if (u.username) u.username = REDACTED;
  if (u.password) u.password = REDACTED;
  for (const name of [...u.searchParams.keys()]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, REDACTED);
  // URLSearchParams percent-encodes the mask; shown as written, it reads better.
  return u.toString().replaceAll(encodeURIComponent(REDACTED), REDACTED);
}

/** `text` with every http(s) URL in it passed through {@link redactUrl}: for errors, log lines and events. */
export function redactUrls(text: string): string {
  // Punctuation that ends a sentence is not part of the URL before it.
  return text.replace(/https?:\/\/[^\s"'<>`]+/gi, (m) => {
    const tail = /[.,:;)\]]+$/.exec(m)?.[0] ?? '';
    return redactUrl(m.slice(0, m.length - tail.length)) + tail;
  });
}

/**
 * A source as a reader without the admin role sees it: a URL is only its scheme and host
 * (the path may name private buckets, the query may hold a signature); a Hugging Face id
 * or a path is shown as it is.
 */
export function sourceForViewer(source: string): string {
  try {
    const u = new URL(source);
    if (u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'llmgw:') return `${u.protocol}//${u.host}/…`;
  } catch {
    /* not a URL */
  }
  return source;
}
