import type { NodeView } from './views.js';

/**
 * The names of the contract that need no schema: closed lists and the words for them.
 * Apart from the TypeBox schemas (errors.ts, keys.ts, tokens.ts, views.ts), so that ctl,
 * which reads them at every start, bundles none of TypeBox (issue 32: ctl's start-up).
 */

/**
 * Every way a request to llmgw can fail, as a closed set: code that fails says which of
 * these went wrong, and each surface maps the code onto its own wire in one function
 * (HTTP status for the admin and agent APIs and the dashboard, status plus OpenAI
 * `type`/`code` for the gateway, an exit code for ctl). A new kind of failure is a new
 * entry here, so every one of those maps has to say what it means.
 */
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
 * A key's priority band when the gateway holds requests (every replica saturated):
 * strict, highest first. `standard` when a key names none; a request may lower its own
 * (`x-llmgw-priority`), never raise it.
 */
export const PRIORITIES = ['interactive', 'standard', 'batch'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The roles of a token of the admin listener (tokens.ts). */
export const TOKEN_ROLES = ['admin', 'viewer', 'metrics'] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

/** How long ago a node was seen, in words for tables: `3s`, `2m5s`, `1h4m`, `2d`; `before restart` or `never` without `last_seen_s`. */
export function lastSeenText(n: Pick<NodeView, 'last_seen_s' | 'hostname'>): string {
  const s = n.last_seen_s;
  if (s === undefined) return n.hostname !== undefined ? 'before restart' : 'never';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`;
  return `${Math.floor(s / 86400)}d`;
}

/**
 * A node's state in words, the one vocabulary of ctl and the dashboard (like kubectl's
 * `NotReady,SchedulingDisabled`): its liveness first when it is not ready, then its admin
 * state when it is not the default; `ready` alone when both are.
 */
export function nodeStateWords(n: Pick<NodeView, 'liveness' | 'state' | 'suspect'>): string[] {
  const parts: string[] = [];
  if (n.liveness !== 'ready') parts.push(n.liveness);
  if (n.state !== 'ready' || parts.length === 0) parts.push(n.state);
  // Last, so the state columns scripts match on keep their first word.
  if (n.suspect !== undefined) parts.push('suspect');
  return parts;
}
