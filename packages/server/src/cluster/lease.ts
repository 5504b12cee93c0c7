import { setTimeout as delay } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Fence } from '../store/store.js';
import { DB_MS, messageOf, num } from './db-time.js';

/** The lease term a leader writes under (the Store contract's `Fence`). */
export type { Fence };

/** Who holds the lease as last seen, for status views. */
export interface LeaderInfo {
  /** Absent when nobody holds an unexpired lease (as far as this instance last saw). */
  holder?: string;
  /** The term's number: increases by one with every new term, never reused. */
  epoch: number;
  /** DB ms when the holder's term began. */
  sinceMs?: number;
}

export interface LeaderLeaseOptions {
  pool: pg.Pool;
  log: Logger;
  instanceId: string;
  /** How long a term lasts without a renew, in ms (the longest a dead leader blocks a successor). */
  ttlMs?: number;
  /** How often to renew, and for a follower to try to take over (default ttl / 4). */
  renewEveryMs?: number;
  /** Part of the ttl given up locally, for clock-rate differences and scheduling (default 0.1). */
  safetyMargin?: number;
  /** A clock that never jumps back and keeps running across a pause (SIGSTOP): tests inject one. */
  monotonicNow?: () => number;
}

/**
 * Take or renew the lease in one statement. A row absent is inserted; present, it is
 * taken when it is ours or has expired (or was released). A new term — another holder,
 * or ours after it lapsed — gets `epoch + 1` and a new `since_ms`, so a term that ended
 * is never valid again even for the same holder. `now` is evaluated once, so the expiry
 * test and the new times agree.
 *
 * When the lease is not taken, the second branch returns the row as it stands, so a
 * follower learns who leads from the same round trip. That branch reads the statement's
 * snapshot: when a concurrent taker committed first it may see no row, which is read as
 * "not ours, holder unknown" until the next try.
 */
const ACQUIRE = `
WITH now AS (SELECT ${DB_MS} AS ms),
taken AS (
  INSERT INTO leader AS l (id, holder, epoch, expires_ms, since_ms)
  SELECT 1, $1, 1, ms + $2, ms FROM now
  ON CONFLICT (id) DO UPDATE SET
    holder = excluded.holder,
    epoch = CASE WHEN l.holder = excluded.holder AND l.expires_ms >= excluded.since_ms THEN l.epoch ELSE l.epoch + 1 END,
    since_ms = CASE WHEN l.holder = excluded.holder AND l.expires_ms >= excluded.since_ms THEN l.since_ms ELSE excluded.since_ms END,
    expires_ms = excluded.expires_ms
  WHERE l.holder = excluded.holder OR l.holder IS NULL OR l.expires_ms < excluded.since_ms
  RETURNING holder, epoch, since_ms, expires_ms
)
SELECT holder, epoch, since_ms, expires_ms, true AS ours FROM taken
UNION ALL
SELECT holder, epoch, since_ms, expires_ms, false FROM leader, now
  WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM taken) AND expires_ms >= now.ms`;

/** Ends our term at once (if it is still ours), so a successor need not wait for expiry. */
const RELEASE = `
WITH r AS (UPDATE leader SET holder = NULL, expires_ms = 0 WHERE id = 1 AND holder = $1 AND epoch = $2 RETURNING 1)
SELECT pg_notify('llmgw', 'leader') FROM r`;

interface LeaseRow {
  holder: string | null;
  epoch: string;
  since_ms: string;
  expires_ms: string;
  ours: boolean;
}

/**
 * One leader among the instances on a database: a lease row (`leader`, id 1) with an
 * expiry in DB ms and an epoch per term. See README.md in this folder.
 *
 * Locally, leadership is valid only until the monotonic time when the last successful
 * renew was *sent*, plus the ttl, less a safety margin. The database computed the
 * expiry no earlier than that send, so the local end comes first. `isLeader()` reads
 * the clock on every call: a process resumed after a pause longer than the lease is not
 * leader, before any timer or reply has run.
 */
export class LeaderLease {
  private readonly pool: pg.Pool;
  private readonly log: Logger;
  readonly instanceId: string;
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  private readonly marginMs: number;
  private readonly now: () => number;

  /** Whether we consider ourselves in a term (what onChange last said). */
  private leading = false;
  /** The monotonic time our term's local validity ends. */
  private validUntil = 0;
  private epoch = 0;
  private seen: LeaderInfo = { epoch: 0 };
  private lastError?: string;
  private timer?: NodeJS.Timeout;
  private expiryTimer?: NodeJS.Timeout;
  /** Bumped to make an answer still in flight count for nothing (after stop, or when it hung). */
  private generation = 0;
  private inFlightSince?: number;
  /** The last renew's answer (undefined for none or a failure): what `stop` waits for before it releases. */
  private renewing: Promise<LeaseRow | undefined> = Promise.resolve(undefined);
  private stopped = false;
  private readonly listeners = new Set<(leader: boolean) => void>();

  constructor(o: LeaderLeaseOptions) {
    this.pool = o.pool;
    this.log = o.log;
    this.instanceId = o.instanceId;
    this.ttlMs = o.ttlMs ?? 2000;
    this.renewEveryMs = o.renewEveryMs ?? Math.max(1, Math.floor(this.ttlMs / 4));
    this.marginMs = Math.ceil(this.ttlMs * (o.safetyMargin ?? 0.1));
    this.now = o.monotonicNow ?? (() => performance.now());
    if (this.renewEveryMs >= this.ttlMs - this.marginMs) {
      throw new Error(`renewEveryMs (${this.renewEveryMs}) must be well under the lease's local validity (${this.ttlMs - this.marginMs} ms)`);
    }
  }

  /** Tries once at once (so the caller knows where it stands), then every `renewEveryMs`. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.tick();
    if (this.stopped) return;
    this.timer = setInterval(() => void this.tick(), this.renewEveryMs);
    this.timer.unref();
  }

  /** Stops renewing and releases the lease if held, so a successor takes over at its next try. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.generation++;
    clearInterval(this.timer);
    clearTimeout(this.expiryTimer);
    const held = this.leading ? this.epoch : undefined;
    if (this.leading) this.lose('stopped (lease released)');
    // A renew still in flight can land after the release and take the lease again, for a
    // term nobody renews, which a successor would wait out: wait for it (no longer than a
    // renew is waited for anyway) and release what it took.
    const late = await Promise.race([this.renewing, delay(this.ttlMs, undefined, { ref: false })]);
    const epoch = late?.ours ? num(late.epoch) : held;
    if (epoch === undefined) return;
    try {
      await this.pool.query(RELEASE, [this.instanceId, epoch]);
    } catch (err) {
      this.log.warn({ err: messageOf(err) }, `could not release the leader lease; it expires on its own within ${this.ttlMs} ms`);
    }
  }

  /** Whether this instance may act as leader now: in a term whose local validity has not run out. */
  isLeader(): boolean {
    return this.leading && this.now() < this.validUntil;
  }

  /** The term to write under, while leader. */
  fence(): Fence | undefined {
    return this.isLeader() ? { holder: this.instanceId, epoch: this.epoch } : undefined;
  }

  /** The leader as this instance last saw it (its own term while leader). */
  info(): LeaderInfo {
    return { ...this.seen };
  }

  /** Calls `cb(true)` when this instance becomes leader and `cb(false)` when it stops being; returns the unsubscribe. */
  onChange(cb: (leader: boolean) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  private async tick(): Promise<void> {
    this.checkExpiry();
    const now = this.now();
    // One renew at a time; one that has not answered within the ttl is given up (its
    // connection may hang on a dead network) and a new one sent.
    if (this.inFlightSince !== undefined && now - this.inFlightSince < this.ttlMs) return;
    const generation = ++this.generation;
    const sentAt = now;
    this.inFlightSince = sentAt;
    let row: LeaseRow | undefined;
    try {
      const query = this.pool.query<LeaseRow>(ACQUIRE, [this.instanceId, this.ttlMs]);
      this.renewing = query.then(
        (r) => r.rows[0],
        () => undefined,
      );
      row = (await query).rows[0];
    } catch (err) {
      if (generation !== this.generation) return;
      this.inFlightSince = undefined;
      const msg = messageOf(err);
      if (this.lastError === undefined) this.log.warn({ err: msg }, `leader lease: cannot reach the database (${msg})`);
      this.lastError = msg;
      this.checkExpiry();
      return;
    }
    if (generation !== this.generation) return;
    this.inFlightSince = undefined;
    if (this.lastError !== undefined) this.log.info('leader lease: the database answers again');
    this.lastError = undefined;
    this.apply(row, sentAt);
  }

  private apply(row: LeaseRow | undefined, sentAt: number): void {
    if (row?.ours) {
      const epoch = num(row.epoch);
      if (this.leading && epoch !== this.epoch) this.lose(`term ${this.epoch} lapsed in the database`);
      this.seen = { holder: this.instanceId, epoch, sinceMs: num(row.since_ms) };
      this.epoch = epoch;
      this.validUntil = sentAt + this.ttlMs - this.marginMs;
      // An answer that took longer than the validity gives none: the term is the
      // database's, but we sit it out (a successor takes over when it expires).
      if (!this.leading && this.now() < this.validUntil) {
        this.leading = true;
        this.log.info({ epoch }, `became leader (epoch ${epoch})`);
        this.pool.query("SELECT pg_notify('llmgw', 'leader')").catch(() => {});
        this.emit(true);
      }
      if (this.leading) this.armExpiry();
      return;
    }
    this.seen = row?.holder ? { holder: row.holder, epoch: num(row.epoch), sinceMs: num(row.since_ms) } : { epoch: row ? num(row.epoch) : this.seen.epoch };
    if (this.leading) this.lose(row?.holder ? `${row.holder} holds the lease (epoch ${row.epoch})` : 'the lease is no longer ours');
  }

  /** Ends a term whose local validity ran out; it is what notices a dead database. */
  private checkExpiry(): void {
    if (!this.leading || this.now() < this.validUntil) return;
    this.lose(
      this.lastError !== undefined
        ? `no renew for ${this.ttlMs - this.marginMs} ms, the database is unreachable (${this.lastError})`
        : `no renew confirmed within ${this.ttlMs - this.marginMs} ms`,
    );
  }

  /** A timer at the local end of the term, so onChange(false) comes on time even between ticks. */
  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    // A timer may fire a little early by this clock: then it is set again, not dropped.
    this.expiryTimer = setTimeout(() => (this.now() < this.validUntil ? this.armExpiry() : this.checkExpiry()), Math.max(0, this.validUntil - this.now()) + 1);
    this.expiryTimer.unref();
  }

  private lose(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    clearTimeout(this.expiryTimer);
    if (this.seen.holder === this.instanceId) this.seen = { epoch: this.epoch };
    this.log.info({ epoch: this.epoch }, `lost leadership: ${reason}`);
    this.emit(false);
  }

  private emit(leader: boolean): void {
    for (const cb of this.listeners) {
      try {
        cb(leader);
      } catch (err) {
        this.log.error({ err: messageOf(err) }, 'a leadership listener threw');
      }
    }
  }
}

/** The leader as the database has it now, for status views on any instance. */
export async function currentLeader(pool: pg.Pool): Promise<LeaderInfo & { expiresMs?: number }> {
  const { rows } = await pool.query<{ holder: string | null; epoch: string; since_ms: string; expires_ms: string; now_ms: string }>(
    `SELECT holder, epoch, since_ms, expires_ms, ${DB_MS} AS now_ms FROM leader WHERE id = 1`,
  );
  const r = rows[0];
  if (!r) return { epoch: 0 };
  const live = r.holder !== null && num(r.expires_ms) > num(r.now_ms);
  return live ? { holder: r.holder!, epoch: num(r.epoch), sinceMs: num(r.since_ms), expiresMs: num(r.expires_ms) } : { epoch: num(r.epoch) };
}

/** The contract's fenced check: whether `fence` is still the live term (a write under it would be taken). */
export async function fenceHolds(pool: pg.Pool | pg.PoolClient, fence: Fence): Promise<boolean> {
  const r = await pool.query(`UPDATE leader SET epoch = epoch WHERE id = 1 AND holder = $1 AND epoch = $2 AND expires_ms > ${DB_MS} RETURNING 1`, [
    fence.holder,
    fence.epoch,
  ]);
  return r.rowCount === 1;
}
