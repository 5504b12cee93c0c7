/**
 * Background writes (usage, node reports, replica records, events) go to the store one
 * batch at a time: two batches in flight at once could land out of order, or send the
 * same deltas twice. `serialWrites` returns a `flush` that starts the loop when there is
 * work, and that a caller joins while it runs; what is queued meanwhile is taken by the
 * loop's next batch. `writeBatch` takes what is pending and resolves false when the
 * store refused it (it has put the batch back); the loop then stops until the next call,
 * unless a call came while that batch was being written: that call asked for its work to
 * be tried after it was queued, so the loop tries once more. `flush` resolves true once
 * nothing is pending.
 */
export function serialWrites(hasWork: () => boolean, writeBatch: () => Promise<boolean>): () => Promise<boolean> {
  let running: Promise<boolean> | undefined;
  let askedAgain = false;
  const loop = async (): Promise<boolean> => {
    try {
      while (hasWork()) {
        askedAgain = false;
        if (!(await writeBatch()) && !askedAgain) return false;
      }
      return true;
    } finally {
      running = undefined;
    }
  };
  return () => {
    if (running) {
      askedAgain = true;
      return running;
    }
    if (!hasWork()) return Promise.resolve(true);
    // hasWork() is true, so the loop awaits a write before its `finally` clears `running`.
    running = loop();
    return running;
  };
}

/**
 * A reload from the store (on another instance's NOTIFY, or the periodic one): one read
 * at a time, and a burst of calls is one more read, not one each. A call while a read is
 * under way may come after a commit that read began before (a revoked key), so it is
 * answered by one further read that begins after the current one is installed, shared by
 * every call meanwhile. Reads never overlap, so none finishes out of order and an older
 * one cannot bring back what a commit changed; and joining 1,000 nodes, a NOTIFY each, no
 * longer reads every node row 1,000 times (issue 32). With `burstMs`, a read asked for
 * during the one before begins that long after it, so a burst is read a few times, not
 * once per change. A read that fails ends the run (the callers waiting get its error);
 * the next call or the periodic reload reads again.
 */
export function latestRead<T>(load: () => Promise<T>, install: (value: T) => void, opts: { burstMs?: number } = {}): () => Promise<void> {
  // serialWrites' loop, with "asked for" as its work: a call during a read asks again.
  let asked = false;
  const flush = serialWrites(
    () => asked,
    async () => {
      asked = false;
      install(await load());
      // Asked again during the read: a burst (nodes joining, a NOTIFY each). The next read
      // waits a little for the rest of it; a lone change is read at once.
      if (asked && opts.burstMs) await new Promise((r) => setTimeout(r, opts.burstMs));
      return true;
    },
  );
  return async () => {
    asked = true;
    await flush();
  };
}
