/**
 * Tokens counted over a sliding window, for a key's tokens-per-minute quota (`tpm`,
 * issue 26; one per key with a quota in `KeyRing`). Pure: the clock is passed in. Fixed memory:
 * the window is cut into buckets (60 of 1 s for a minute), a ring indexed by time, so a
 * key costs the same whatever it sends. A bucket leaves the window whole, so the total
 * is the window's tokens to within one bucket's age: a token counted at 10.9 s is
 * still counted until the window has passed 11 s, at most one bucket (1 s of 60) late.
 */
export class TokenWindow {
  private readonly buckets: Float64Array;
  /** The bucket number (time ÷ bucketMs) each slot holds; -1 when empty. */
  private readonly slots: Float64Array;

  constructor(
    readonly windowMs = 60_000,
    readonly bucketMs = 1000,
  ) {
    // One bucket more than the window holds: the oldest is the one the window's start is
    // inside, so no token younger than the window is dropped early.
    const n = Math.ceil(windowMs / bucketMs) + 1;
    this.buckets = new Float64Array(n);
    this.slots = new Float64Array(n).fill(-1);
  }

  /** Counts tokens at a time (a request's reported usage, when it ends). */
  add(tokens: number, nowMs: number): void {
    if (!(tokens > 0)) return;
    const b = Math.floor(nowMs / this.bucketMs);
    const i = b % this.buckets.length;
    if (this.slots[i] !== b) {
      this.slots[i] = b;
      this.buckets[i] = 0;
    }
    this.buckets[i]! += tokens;
  }

  /** Tokens in the window ending now: every bucket that holds a time of the last `windowMs`. */
  total(nowMs: number): number {
    const now = Math.floor(nowMs / this.bucketMs);
    let t = 0;
    for (let i = 0; i < this.buckets.length; i++) if (this.live(this.slots[i]!, now)) t += this.buckets[i]!;
    return t;
  }

  /**
   * Whole seconds until the window holds fewer than `limit` tokens, as tokens counted now
   * leave it (0 when it already does): a `Retry-After` that is right the first time.
   */
  retryAfterS(limit: number, nowMs: number): number {
    const now = Math.floor(nowMs / this.bucketMs);
    let t = this.total(nowMs);
    if (t < limit) return 0;
    // Oldest first: each bucket leaves the window bucketMs × n after it opened.
    const live = [...this.slots]
      .map((b, i) => ({ b, tokens: this.buckets[i]! }))
      .filter((x) => this.live(x.b, now))
      .sort((x, y) => x.b - y.b);
    for (const x of live) {
      t -= x.tokens;
      if (t < limit) return Math.max(1, Math.ceil(((x.b + this.buckets.length) * this.bucketMs - nowMs) / 1000));
    }
    return Math.ceil(this.windowMs / 1000);
  }

  private live(bucket: number, now: number): boolean {
    return bucket >= 0 && bucket > now - this.buckets.length && bucket <= now;
  }
}
