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
    'api_key', '*.api_key', '*.*.api_key', '*[*].api_key', '*.*[*].api_key',
    'apiKey', '*.apiKey', '*.*.apiKey', '*[*].apiKey',
    'secret', '*.secret', 'authorization', '*.authorization', '*.headers.authorization',
  ],
  censor: REDACTED,
};

/** `text` with every occurrence of each (non-empty) secret replaced by {@link REDACTED}. */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join(REDACTED);
  return out;
}
