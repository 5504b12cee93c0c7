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
 * A reload from the store (on another instance's NOTIFY, or the periodic one) where
 * only the newest read may be installed: two reads on two pooled connections can finish
 * out of order, and the older one — begun before a commit — would bring back what that
 * commit changed (a revoked key accepted again) until the next reload.
 */
export function latestRead<T>(load: () => Promise<T>, install: (value: T) => void): () => Promise<void> {
  let started = 0;
  let installed = 0;
  return async () => {
    const seq = ++started;
    const value = await load();
    if (seq < installed) return;
    installed = seq;
    install(value);
  };
}
