/**
 * How fast the join token may join (`--join-rate`, joins per minute): a bucket of as many
 * joins, refilled evenly over the minute. One join token is shared by the whole fleet and
 * anyone holding it can join under new ids; this bounds how fast such joins arrive
 * (issue 27: 140 nodes joined at once and stalled the server). A rotation starts the new
 * token with a full bucket. Each server instance counts its own joins.
 */
export class JoinRate {
  private tokens: number;
  private atMs: number;

  constructor(
    readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = perMinute;
    this.atMs = now();
  }

  /** Takes one join: undefined when it may go ahead, else the whole seconds until one may. */
  take(): number | undefined {
    const nowMs = this.now();
    const perMs = this.perMinute / 60_000;
    this.tokens = Math.min(this.perMinute, this.tokens + Math.max(0, nowMs - this.atMs) * perMs);
    this.atMs = nowMs;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - this.tokens) / perMs / 1000));
  }

  /** A new join token (a rotation): a full bucket. */
  reset(): void {
    this.tokens = this.perMinute;
    this.atMs = this.now();
  }
}
