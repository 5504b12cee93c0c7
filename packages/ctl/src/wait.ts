/** Elapsed time as an operator reads it: `45s`, `2m05s`, `1h02m`. */
export function elapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** The clock, the pause between polls and where progress lines go: given, so a test runs a wait on a fake clock. */
export interface WaitIo {
  /** Give up waiting after this long; `timeoutText` is how the operator wrote it. */
  timeoutMs: number;
  timeoutText: string;
  /** Print a line at least this often while nothing changes, so a stuck wait is never silent. */
  progressEveryMs: number;
  pollMs: number;
  now(): number;
  sleep(ms: number): Promise<void>;
  progress(line: string): void;
}

/** What one look at the thing waited for says: done (with the result), or where it stands in one line. */
export type Look<T> = { done: T } | { status: string };

/**
 * The wait of `ctl drain` and `ctl rollout status`, kubectl-style: looks (`look` throws
 * to fail at once), prints where it stands whenever that changes, and with the elapsed
 * time every `progressEveryMs` while it does not; past the timeout, `late(status)` is
 * thrown (the operation itself goes on, server side).
 */
export async function waitUntil<T>(w: WaitIo, look: () => Promise<Look<T>>, still: string, late: (status: string) => Error): Promise<T> {
  const started = w.now();
  let last = '';
  let printedAt = started;
  for (;;) {
    const seen = await look();
    if ('done' in seen) return seen.done;
    const now = w.now();
    if (seen.status !== last) {
      w.progress(`  ${seen.status}`);
      printedAt = now;
    } else if (now - printedAt >= w.progressEveryMs) {
      w.progress(`  ${still} after ${elapsed(now - started)}: ${seen.status}`);
      printedAt = now;
    }
    last = seen.status;
    if (now - started > w.timeoutMs) throw late(seen.status);
    await w.sleep(w.pollMs);
  }
}
