import type { ErrorCode, LimitReason } from '@llmgw/shared';

/**
 * What went wrong, in the shared vocabulary (`ERROR_CODES`). Domain code throws this and
 * never picks a status: each surface turns the code into its wire form in one function
 * (`httpStatus` here, `openAIError` in the gateway).
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: {
      /** The input field at fault. */
      field?: string;
      /** When the same request may succeed again, in seconds. */
      retryAfterS?: number;
      /** Which limit a 429 is for, for the metrics (`llmgw_rate_limited_total`). */
      reason?: LimitReason;
    } = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }

  get field(): string | undefined {
    return this.details.field;
  }
}

export const badRequest = (message: string, field?: string) => new DomainError('invalid_request', message, field ? { field } : {});
export const notFound = (message: string) => new DomainError('not_found', message);

const STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  missing_field: 400,
  invalid_json: 400,
  too_large: 413,
  unsupported_media_type: 415,
  unauthenticated: 401,
  forbidden: 403,
  model_not_allowed: 403,
  conflict: 409,
  not_found: 404,
  model_not_found: 404,
  no_route: 404,
  range_not_satisfiable: 416,
  method_not_allowed: 405,
  rate_limited: 429,
  concurrency_limited: 429,
  no_ready_replica: 503,
  upstream_failed: 502,
  overloaded: 503,
  store_unavailable: 503,
  not_leader: 503,
  internal: 500,
};

/** The HTTP status of an error code, the same on every listener. */
export function httpStatus(code: ErrorCode): number {
  return STATUS[code];
}

/** The most of a client's input an error message repeats. */
const ECHO = 64;

/** A bounded prefix of untrusted input, for an error message. */
export function echo(input: string): string {
  return input.length > ECHO ? `${input.slice(0, ECHO)}...` : input;
}

/**
 * What express's body parsers (http-errors with a `type`) mean, in our vocabulary: a
 * body that cannot be decoded is the client's fault (400), an encoding or charset we do
 * not speak is 415, too much is 413. Keyed by type in a Map, never a plain object, so a
 * type can never resolve to something inherited.
 */
const PARSER_ERRORS = new Map<string, [ErrorCode, string, string?]>([
  ['entity.parse.failed', ['invalid_json', 'invalid JSON', '(body)']],
  ['entity.too.large', ['too_large', 'request body too large', '(body)']],
  ['parameters.too.many', ['too_large', 'too many form fields', '(body)']],
  ['encoding.unsupported', ['unsupported_media_type', 'unsupported Content-Encoding', 'content-encoding']],
  ['charset.unsupported', ['unsupported_media_type', 'unsupported charset', 'content-type']],
  ['request.aborted', ['invalid_request', 'request aborted before its body was complete', '(body)']],
  ['request.size.invalid', ['invalid_request', 'body length does not match Content-Length', 'content-length']],
  ['querystring.parse.rangeError', ['invalid_request', 'form nested too deep', '(body)']],
  ['stream.encoding.set', ['internal', 'request stream already decoded']],
]);

/**
 * Any thrown value as a `DomainError`: express's body parsers report malformed and
 * oversized bodies with their own `type`, the router a bad `%`-escape in the path as a
 * `URIError`; any other error with a 4xx status from a library is still the client's;
 * anything else is a bug (`internal`), keeping its message.
 */
export function toDomainError(err: unknown): DomainError {
  if (err instanceof DomainError) return err;
  const e = err as { type?: unknown; message?: unknown; status?: unknown; code?: unknown } | null | undefined;
  const message = typeof e?.message === 'string' ? e.message : undefined;
  if (err instanceof URIError) return new DomainError('invalid_request', `bad %-escape in the path: ${echo(message ?? '')}`, { field: 'path' });
  const known = typeof e?.type === 'string' ? PARSER_ERRORS.get(e.type) : undefined;
  if (known) {
    const [code, what, field] = known;
    // The parser's own message names the charset or encoding; the JSON error, the position.
    const detail = message && code !== 'too_large' ? `: ${echo(message)}` : '';
    return new DomainError(code, `${what}${detail}`, field ? { field } : {});
  }
  const status = typeof e?.status === 'number' ? e.status : 0;
  if (status >= 400 && status < 500) {
    // zlib's errors (bad gzip or deflate) carry a `Z_` code.
    const field = typeof e?.code === 'string' && e.code.startsWith('Z_') ? 'content-encoding' : '(body)';
    const code: ErrorCode = status === 413 ? 'too_large' : status === 415 ? 'unsupported_media_type' : 'invalid_request';
    const what = field === 'content-encoding' ? 'body does not decode as its Content-Encoding' : 'bad request';
    return new DomainError(code, `${what}: ${echo(message ?? String(status))}`, { field });
  }
  return new DomainError('internal', message ?? 'internal error');
}
