import type { ErrorCode } from '@llmgw/shared';

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
  unauthenticated: 401,
  forbidden: 403,
  model_not_allowed: 403,
  not_found: 404,
  model_not_found: 404,
  no_route: 404,
  method_not_allowed: 405,
  rate_limited: 429,
  concurrency_limited: 429,
  no_ready_replica: 503,
  upstream_failed: 502,
  store_unavailable: 503,
  internal: 500,
};

/** The HTTP status of an error code, the same on every listener. */
export function httpStatus(code: ErrorCode): number {
  return STATUS[code];
}

/**
 * Any thrown value as a `DomainError`: express's body parsers report malformed and
 * oversized bodies with their own `type`, and anything else is a bug (`internal`),
 * keeping its message.
 */
export function toDomainError(err: unknown): DomainError {
  if (err instanceof DomainError) return err;
  const e = err as { type?: unknown; message?: unknown } | null | undefined;
  const message = typeof e?.message === 'string' ? e.message : undefined;
  if (e?.type === 'entity.parse.failed') return new DomainError('invalid_json', `invalid JSON: ${message ?? 'parse error'}`);
  if (e?.type === 'entity.too.large') return new DomainError('too_large', 'request body too large');
  return new DomainError('internal', message ?? 'internal error');
}
