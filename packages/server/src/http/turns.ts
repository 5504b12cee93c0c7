/**
 * One at a time, one per turn of the event loop: `wait()` resolves its callers in order,
 * each in a turn of its own, so whatever else is ready (a health check, another
 * listener's request) is served between them. For work that is heavy only in bulk: a
 * heartbeat at the report cap costs a few ms to check, and 140 of them arriving together
 * must not hold the listeners for the sum (issue 27).
 */
export class Turns {
  private readonly waiting: (() => void)[] = [];
  private scheduled = false;

  /** Resolves in a later turn of the event loop, after those that waited before. */
  wait(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // An immediate queued from an immediate runs in the next turn, after its I/O.
    setImmediate(() => {
      this.scheduled = false;
      this.waiting.shift()?.();
      if (this.waiting.length) this.schedule();
    });
  }
}
