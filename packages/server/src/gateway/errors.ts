import type { ServerResponse } from 'node:http';
import type { ErrorCode, OpenAIErrorBody } from '@llmgw/shared';
import { DomainError, httpStatus } from '../errors.js';

interface OpenAIShape {
  type: string;
  code: string | null;
  /** `x-should-retry` for the official SDKs, when the answer is certain either way. */
  shouldRetry?: 'true' | 'false';
}

// Quota and permission errors will not pass on retry; a per-minute limit will, later.
const OPENAI: Record<ErrorCode, OpenAIShape> = {
  invalid_request: { type: 'invalid_request_error', code: 'invalid_value' },
  missing_field: { type: 'invalid_request_error', code: 'missing_field' },
  invalid_json: { type: 'invalid_request_error', code: 'invalid_json' },
  too_large: { type: 'invalid_request_error', code: 'request_too_large' },
  unsupported_media_type: { type: 'invalid_request_error', code: 'unsupported_media_type' },
  unauthenticated: { type: 'invalid_request_error', code: 'invalid_api_key', shouldRetry: 'false' },
  forbidden: { type: 'permission_error', code: 'forbidden', shouldRetry: 'false' },
  model_not_allowed: { type: 'permission_error', code: 'model_not_allowed', shouldRetry: 'false' },
  conflict: { type: 'invalid_request_error', code: 'conflict', shouldRetry: 'false' },
  not_found: { type: 'invalid_request_error', code: 'not_found', shouldRetry: 'false' },
  model_not_found: { type: 'invalid_request_error', code: 'model_not_found', shouldRetry: 'false' },
  no_route: { type: 'invalid_request_error', code: 'unknown_url', shouldRetry: 'false' },
  range_not_satisfiable: { type: 'invalid_request_error', code: 'range_not_satisfiable', shouldRetry: 'false' },
  method_not_allowed: { type: 'invalid_request_error', code: 'method_not_allowed' },
  rate_limited: { type: 'rate_limit_error', code: 'rate_limit_exceeded', shouldRetry: 'true' },
  concurrency_limited: { type: 'rate_limit_error', code: 'concurrency_limit_exceeded' },
  no_ready_replica: { type: 'server_error', code: 'no_ready_replica' },
  upstream_failed: { type: 'server_error', code: 'upstream_error' },
  overloaded: { type: 'server_error', code: 'overloaded', shouldRetry: 'true' },
  store_unavailable: { type: 'server_error', code: 'store_unavailable' },
  not_leader: { type: 'server_error', code: 'not_leader' },
  internal: { type: 'server_error', code: null },
};

/**
 * The one place the gateway turns a failure into its OpenAI wire form: the HTTP status
 * (the same as on the admin listener), the headers the SDKs read, and the error body.
 */
export function openAIError(e: DomainError): { status: number; headers: Record<string, string>; body: OpenAIErrorBody } {
  const shape = OPENAI[e.code];
  const headers: Record<string, string> = {};
  if (e.details.retryAfterS !== undefined) headers['retry-after'] = String(e.details.retryAfterS);
  if (shape.shouldRetry) headers['x-should-retry'] = shape.shouldRetry;
  return { status: httpStatus(e.code), headers, body: { error: { message: e.message, type: shape.type, param: e.field ?? null, code: shape.code } } };
}

/** A failure reported inside a stream that already said 200: one SSE `data:` event, as the SDKs expect. */
export function errorEvent(e: DomainError): string {
  return `data: ${JSON.stringify(openAIError(e).body)}\n\n`;
}

/** Anything a request threw, as a `DomainError`; `unexpected` is told about the ones that are bugs. */
export function asDomainError(err: unknown, unexpected: (err: unknown) => void): DomainError {
  if (err instanceof DomainError) return err;
  unexpected(err);
  return new DomainError('internal', `internal error: ${(err as Error).message}`);
}

/** Answers with the error, unless the response has begun: then all that is left is to end it. */
export function sendError(res: ServerResponse, e: DomainError): void {
  if (res.headersSent) {
    if (!res.writableEnded && !res.destroyed) res.end();
    return;
  }
  const { status, headers, body } = openAIError(e);
  sendJson(res, status, body, headers);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}
