import type { ErrorCode } from '@llmgw/shared';

/**
 * Why a command failed, as scripts see it: each kind of failure has one exit code,
 * given here and nowhere else.
 * - `failed`: the server refused the request (any error answer, a bad token or a token
 *   whose role does not allow the request included)
 *   or the operation did not finish (a drain cancelled or timed out);
 * - `usage`: a flag or argument ctl could not make sense of, so nothing was sent;
 * - `unreachable`: no answer from the server at all.
 */
export const FAILURES = ['failed', 'usage', 'unreachable'] as const;
export type Failure = (typeof FAILURES)[number];

const EXIT_CODES: Record<Failure, 1 | 2 | 3> = { failed: 1, usage: 2, unreachable: 3 };

/**
 * What each error code of the server's answers is, as a failure. Every one is `failed`:
 * the server answered, so the request was sent (not `usage`) and reached llmgw (not
 * `unreachable`); a store that refuses a write is the server refusing too. A record over
 * every code, so a new code in `@llmgw/shared` has to say its exit code here.
 */
const BY_CODE: Record<ErrorCode, Failure> = {
  invalid_request: 'failed',
  missing_field: 'failed',
  invalid_json: 'failed',
  too_large: 'failed',
  unsupported_media_type: 'failed',
  unauthenticated: 'failed',
  forbidden: 'failed',
  model_not_allowed: 'failed',
  conflict: 'failed',
  not_found: 'failed',
  model_not_found: 'failed',
  no_route: 'failed',
  range_not_satisfiable: 'failed',
  method_not_allowed: 'failed',
  rate_limited: 'failed',
  concurrency_limited: 'failed',
  no_ready_replica: 'failed',
  upstream_failed: 'failed',
  overloaded: 'failed',
  store_unavailable: 'failed',
  not_leader: 'failed',
  internal: 'failed',
};

/** The statuses of a proxy in front of the server that could not get an answer from it. */
const GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * The failure an error answer stands for: its code's (`BY_CODE`) when it carries one of
 * ours. Only an answer without one (a proxy's HTML page, an older server) is judged by
 * its status: a 502, 503 or 504 there is a proxy that could not reach llmgw, so
 * `unreachable`; anything else, `failed`.
 */
export function answerFailure(code: ErrorCode | undefined, status: number): Failure {
  if (code !== undefined) return BY_CODE[code];
  return GATEWAY_STATUSES.has(status) ? 'unreachable' : 'failed';
}

/** The process exit code for a failure. */
export function exitCode(failure: Failure): 1 | 2 | 3 {
  return EXIT_CODES[failure];
}

/** An error to show as one line, then exit with its failure's code. */
export class CtlError extends Error {
  constructor(
    message: string,
    readonly failure: Failure = 'failed',
    /** The HTTP status of the server's refusal, when it was one. */
    readonly status?: number,
    /** The error code of the server's refusal, when it carried one (`ctl logs -f` ends on `not_found`). */
    readonly code?: ErrorCode,
  ) {
    super(message);
  }
}

/**
 * Whether `e` is the server refusing with `code`: by the code its answer carried, or,
 * when it carried none (an older server, a proxy), by `status`, the code's status.
 */
export function refusedWith(e: unknown, code: ErrorCode, status: number): boolean {
  if (!(e instanceof CtlError)) return false;
  return e.code !== undefined ? e.code === code : e.status === status;
}

/** Anything a command threw, as a `CtlError`: an unexpected one is a plain failure. */
export function asCtlError(err: unknown): CtlError {
  return err instanceof CtlError ? err : new CtlError((err as Error).message);
}
