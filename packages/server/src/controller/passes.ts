/**
 * When the controller's reconcile passes run. Most changes (a join, a node back, a shard
 * state, an admin action, the catalog) ask for one `soon`: on the next turn of the event
 * loop, so the changes of one turn share a pass. A live node's changed report asks for a
 * `bounded` one: at most one such pass per `boundMs`. Every heartbeat may carry a new report
 * (the GPU memory in use moves) and a pass plans over the whole fleet, so at thousands of
 * heartbeats a second a pass per turn would be most of the server's work; a report only
 * feeds placement, which a fraction of a second later is none the worse for it.
 */
export class PassSchedule {
  private pending = false;
  private timer?: NodeJS.Timeout;
  /** When the last pass began (`performance.now()`: a timer's clock, not the fleet's). */
  private lastAt = -Infinity;

  constructor(
    private readonly pass: () => void,
    private readonly boundMs: number,
  ) {}

  /** A pass on the next turn of the event loop. */
  soon(): void {
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      this.run();
    });
  }

  /**
   * A pass `boundMs` after the last one began, or `soon` if that is past. Any pass in
   * between covers it: what asked for it is already in the inventory.
   */
  bounded(): void {
    if (this.pending || this.timer) return;
    const wait = this.lastAt + this.boundMs - performance.now();
    if (wait <= 0) return this.soon();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.soon();
    }, wait);
    this.timer.unref();
  }

  /** A pass now (the interval's, and the one at start). */
  run(): void {
    this.lastAt = performance.now();
    this.stopTimer();
    this.pass();
  }

  /** Drops a bounded pass still waiting. */
  stop(): void {
    this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
