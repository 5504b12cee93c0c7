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

/** The process exit code for a failure. */
export function exitCode(failure: Failure): 1 | 2 | 3 {
  return EXIT_CODES[failure];
}

/** An error to show as one line, then exit with its failure's code. */
export class CtlError extends Error {
  constructor(
    message: string,
    readonly failure: Failure = 'failed',
    /** The HTTP status of the server's refusal, when it was one (`ctl logs -f` ends on a 404). */
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Anything a command threw, as a `CtlError`: an unexpected one is a plain failure. */
export function asCtlError(err: unknown): CtlError {
  return err instanceof CtlError ? err : new CtlError((err as Error).message);
}
