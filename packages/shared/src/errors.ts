import { Type, type Static } from '@sinclair/typebox';

/**
 * Every way a request to llmgw can fail, as a closed set: code that fails says which of
 * these went wrong, and each surface maps the code onto its own wire in one function
 * (HTTP status for the admin and agent APIs and the dashboard, status plus OpenAI
 * `type`/`code` for the gateway, an exit code for ctl). A new kind of failure is a new
 * entry here, so every one of those maps has to say what it means.
 */
/**
 * Why the gateway answered 429, as a closed set: a key's request rate, token quota or
 * concurrency limit, or flow control (a request waited its TTL, or its band's queue was
 * full). The label of `llmgw_rate_limited_total`.
 */
export const LIMIT_REASONS = ['rpm', 'tpm', 'concurrency', 'queue_timeout', 'queue_full'] as const;
export type LimitReason = (typeof LIMIT_REASONS)[number];

export const ERROR_CODES = [
  /** A field is present but its value is not acceptable. */
  'invalid_request',
  /** A required field is absent (or empty). */
  'missing_field',
  /** The body is not JSON, or not a JSON object. */
  'invalid_json',
  /** The body is over the surface's size limit. */
  'too_large',
  /** A `Content-Encoding` or charset the surface cannot decode. */
  'unsupported_media_type',
  /** No credential, or one that is not (or no longer) valid. */
  'unauthenticated',
  /** A request from somewhere it may not come from (another site, a stale form). */
  'forbidden',
  /** A valid API key that may not use the model it asked for. */
  'model_not_allowed',
  /** The request clashes with what is there (a node id already joined, a node that still holds replicas). */
  'conflict',
  /** A named node, replica or key does not exist. */
  'not_found',
  /** A model name or alias that is not in the catalog. */
  'model_not_found',
  /** Nothing is served at this path. */
  'no_route',
  /** A `Range` beyond the end of the file asked for (a model file's resume from a stale offset). */
  'range_not_satisfiable',
  /** The path exists but not with this method. */
  'method_not_allowed',
  /** An API key's requests-per-minute limit is used up. */
  'rate_limited',
  /** An API key has as many requests in flight as it may. */
  'concurrency_limited',
  /** No replica of the model (or of its fallbacks) could serve the request. */
  'no_ready_replica',
  /** An engine failed after its answer had begun, so nothing could be retried. */
  'upstream_failed',
  /** The server is at a bound of its own (the memory for buffered engine replies is in use): retry shortly. */
  'overloaded',
  /** The store (the disk under it) refused a write; reads still work, and it recovers by itself. */
  'store_unavailable',
  /** This server instance lost its leadership (its lease was taken over or expired), so its plan was not written. */
  'not_leader',
  /** A bug or an unexpected failure inside llmgw. */
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

const CODES: ReadonlySet<string> = new Set(ERROR_CODES);

/** Whether a string read off the wire is one of ours. */
export function isErrorCode(v: unknown): v is ErrorCode {
  return typeof v === 'string' && CODES.has(v);
}

/**
 * The error body of the admin listener (admin API, agent API, the dashboard's JSON
 * answers): `error` is the line to show, `code` what went wrong for a program to branch
 * on, `field` the input at fault when there is one.
 */
export const ErrorBodySchema = Type.Object({
  error: Type.String(),
  code: Type.Union(ERROR_CODES.map((c) => Type.Literal(c))),
  field: Type.Optional(Type.String()),
});
export type ErrorBody = Static<typeof ErrorBodySchema>;

/** OpenAI's error body, which the official SDKs turn into typed exceptions. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}
