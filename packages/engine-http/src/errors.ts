/**
 * Every way an engine refuses or fails a request, and its HTTP status: the one status
 * map of both engines. Codes are OpenAI's where OpenAI has one (`model_not_found`,
 * `invalid_api_key`, `context_length_exceeded`), so clients and the gateway classify
 * engine errors as they would OpenAI's.
 */
export const ERROR_STATUS = {
  invalid_json: 400,
  invalid_type: 400,
  invalid_value: 400,
  missing_model: 400,
  unsupported_value: 400,
  unsupported_parameter: 400,
  unsupported_content: 400,
  unsupported_model: 400,
  unsupported_request: 400,
  context_length_exceeded: 400,
  invalid_api_key: 401,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  request_too_large: 413,
  internal_error: 500,
  model_loading: 503,
  /** The test engine's --fail-status: the status is the one asked for (400–599). */
  injected_failure: 500,
} as const;

export type EngineErrorCode = keyof typeof ERROR_STATUS;

/** OpenAI's error body. */
export interface OpenAIErrorBody {
  error: {
    message: string;
    type: string;
    param: string | null;
    code: string | null;
  };
}

/**
 * The one error class of the engines: thrown by parameter checks and backends alike,
 * answered by the HTTP layer with its status and OpenAI's body.
 */
export class EngineError extends Error {
  readonly status: number;
  readonly param: string | null;

  constructor(
    readonly code: EngineErrorCode,
    message: string,
    options: { param?: string | null; status?: number } = {},
  ) {
    super(message);
    this.param = options.param ?? null;
    this.status = options.status ?? ERROR_STATUS[code];
  }
}

/** The `type` OpenAI uses for a status, so gateways that classify errors by type see realistic values. */
export function errorTypeForStatus(status: number): string {
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** The body an {@link EngineError} is answered with; a loading model is llama-server's `unavailable_error`. */
export function errorBody(e: EngineError): OpenAIErrorBody {
  const type = e.code === 'model_loading' ? 'unavailable_error' : errorTypeForStatus(e.status);
  return { error: { message: e.message, type, param: e.param, code: e.code } };
}
