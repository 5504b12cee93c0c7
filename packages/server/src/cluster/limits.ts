import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { Logger } from 'pino';
import { DB_MS, messageOf } from './db-time.js';

/** What one instance counts for one key. */
export interface LocalCount {
  /** Requests admitted in the rate window (the last 60 s, as the gateway's sliding log counts them). */
  requests: number;
  /** Requests being served now. */
  inFlight: number;
  /** Prompt + completion tokens served in the last minute (for keys with a tpm; absent = 0). */
  tokens?: number;
}

export interface SharedLimitsOptions {
  pool: pg.Pool;
  log: Logger;
  instanceId: string;
  /**
   * This instance's counts, read at each sync (instead of `setLocal`): the keys with a
   * limit and something counted. A key it no longer gives has its row removed.
   */
  source?: () => Iterable<readonly [keyId: string, count: LocalCount]>;
  /** How often this instance's rows are written and the others' read (default 250). */
  syncEveryMs?: number;
  /** Another instance's row counts while written within this long, DB ms (default 3000): a dead instance drops out. */
  freshMs?: number;
  /** The rate window, in ms (default 60 000): recorded in `window_ms` as the start of the window a count covers. */
  windowMs?: number;
  /** How long the others' last sums are kept while the database cannot be reached (default 10 000); then each instance limits alone. */
  holdMs?: number;
  monotonicNow?: () => number;
}

/**
 * One statement per sync: remove this instance's rows for keys it no longer counts,
 * upsert the rest, and sum the other instances' fresh rows. The final SELECT reads the
 * statement's snapshot (without this sync's own writes), which is exactly "the others".
 */
const SYNC = `
WITH input AS (SELECT * FROM unnest($2::text[], $3::int[], $4::int[], $7::bigint[]) AS t(key_id, requests, in_flight, tokens)),
gone AS (DELETE FROM limit_counts WHERE instance = $1 AND NOT (key_id = ANY($2::text[]))),
up AS (
  INSERT INTO limit_counts AS c (instance, key_id, window_ms, requests, in_flight, tokens, seen_ms)
  SELECT $1, key_id, ${DB_MS} - $5, requests, in_flight, tokens, ${DB_MS} FROM input
  ON CONFLICT (instance, key_id) DO UPDATE SET window_ms = excluded.window_ms, requests = excluded.requests, in_flight = excluded.in_flight,
    tokens = excluded.tokens, seen_ms = excluded.seen_ms
)
SELECT key_id, sum(requests)::int AS requests, sum(in_flight)::int AS in_flight, sum(tokens)::float8 AS tokens
  FROM limit_counts WHERE instance <> $1 AND seen_ms > ${DB_MS} - $6 GROUP BY key_id`;

/**
 * Per-key rate and concurrency limits across instances with no database round trip per
 * request. Each instance keeps counting locally (the gateway's KeyRing) and, every
 * `syncEveryMs`, publishes its counts and reads the sum of the others'. The gateway adds
 * `othersRequests` / `othersInFlight` (synchronous, from memory) to its own counts when it
 * checks a limit. What the others admitted since their last sync is not seen: the
 * accuracy this gives is worked out in README.md ("Accuracy").
 */
export class SharedLimits {
  private readonly pool: pg.Pool;
  private readonly log: Logger;
  readonly instanceId: string;
  private readonly source?: SharedLimitsOptions['source'];
  readonly syncEveryMs: number;
  private readonly freshMs: number;
  private readonly windowMs: number;
  private readonly holdMs: number;
  private readonly now: () => number;
  private readonly local = new Map<string, LocalCount>();
  private others = new Map<string, LocalCount>();
  private lastSyncAt?: number;
  private failing = false;
  private timer?: NodeJS.Timeout;
  private syncing?: Promise<void>;

  constructor(o: SharedLimitsOptions) {
    this.pool = o.pool;
    this.log = o.log;
    this.instanceId = o.instanceId;
    if (o.source) this.source = o.source;
    this.syncEveryMs = o.syncEveryMs ?? 250;
    this.freshMs = o.freshMs ?? 3000;
    this.windowMs = o.windowMs ?? 60_000;
    this.holdMs = o.holdMs ?? 10_000;
    this.now = o.monotonicNow ?? (() => performance.now());
  }

  /** Requests the other instances admitted for `keyId` in the window, as last synced. */
  othersRequests(keyId: string): number {
    return this.held()?.get(keyId)?.requests ?? 0;
  }

  /** Requests of `keyId` the other instances are serving, as last synced. */
  othersInFlight(keyId: string): number {
    return this.held()?.get(keyId)?.inFlight ?? 0;
  }

  /** Tokens the other instances counted for `keyId` in the last minute, as last synced. */
  othersTokens(keyId: string): number {
    return this.held()?.get(keyId)?.tokens ?? 0;
  }

  /** Sets this instance's count for a key (when no `source` is given); all zero removes it. */
  setLocal(keyId: string, count: LocalCount): void {
    if (count.requests === 0 && count.inFlight === 0 && !count.tokens) this.local.delete(keyId);
    else this.local.set(keyId, { ...count });
  }

  /** Syncs once at once, then every `syncEveryMs`. */
  async start(): Promise<void> {
    await this.sync();
    this.timer = setInterval(() => void this.sync(), this.syncEveryMs);
    this.timer.unref();
  }

  /** Stops syncing and removes this instance's rows, so the others stop counting them at once. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.syncing;
    try {
      await this.pool.query('DELETE FROM limit_counts WHERE instance = $1', [this.instanceId]);
    } catch (err) {
      this.log.warn({ err: messageOf(err) }, `could not remove this instance's limit counts; the others stop counting them after ${this.freshMs} ms`);
    }
  }

  /** Publishes this instance's counts and reads the others' (one statement); one at a time. */
  sync(): Promise<void> {
    this.syncing ??= this.syncOnce().finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async syncOnce(): Promise<void> {
    const ids: string[] = [];
    const requests: number[] = [];
    const inFlight: number[] = [];
    const tokens: number[] = [];
    for (const [id, c] of this.source ? this.source() : this.local) {
      if (c.requests === 0 && c.inFlight === 0 && !c.tokens) continue;
      ids.push(id);
      requests.push(c.requests);
      inFlight.push(c.inFlight);
      tokens.push(Math.round(c.tokens ?? 0));
    }
    const startedAt = this.now();
    try {
      const { rows } = await this.pool.query<{ key_id: string; requests: number; in_flight: number; tokens: number }>(SYNC, [
        this.instanceId,
        ids,
        requests,
        inFlight,
        this.windowMs,
        this.freshMs,
        tokens,
      ]);
      this.others = new Map(rows.map((r) => [r.key_id, { requests: r.requests, inFlight: r.in_flight, tokens: r.tokens }]));
      this.lastSyncAt = startedAt;
      if (this.failing) this.log.info('shared limits: synced again');
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        this.log.warn(
          { err: messageOf(err) },
          `shared limits: cannot sync (${messageOf(err)}); keeping the other instances' last counts for ${this.holdMs / 1000} s`,
        );
      this.failing = true;
    }
  }

  /** The others' sums, unless the last successful sync is older than `holdMs`. */
  private held(): Map<string, LocalCount> | undefined {
    if (this.lastSyncAt === undefined || this.now() - this.lastSyncAt > this.holdMs) return undefined;
    return this.others;
  }
}
