/**
 * The few kinds of failure the server answers with, each mapped to one HTTP status in
 * one place, so handlers throw what went wrong and never pick status codes themselves.
 */
export type ErrorCode = 'bad_request' | 'unauthorized' | 'forbidden' | 'not_found' | 'conflict' | 'unavailable';

const STATUS: Record<ErrorCode, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unavailable: 503,
};

export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The input field at fault, for 400s. */
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get status(): number {
    return STATUS[this.code];
  }
}

export const badRequest = (message: string, field?: string) => new ApiError('bad_request', message, field);
export const notFound = (message: string) => new ApiError('not_found', message);
