import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { Logger } from 'pino';
import { DB_MS, messageOf, num } from './db-time.js';

/** What an instance publishes about itself (the `info` jsonb column). */
export interface InstanceInfo {
  version?: string;
  store?: 'sqlite' | 'postgres';
  /** The result of the instance's last catalog load or reload. */
  catalog?: { digest: string; models: number; error?: string };
  [more: string]: unknown;
}

/** One instance as `list()` gives it. */
export interface InstanceRow {
  id: string;
  adminUrl?: string;
  clientUrl?: string;
  /** DB ms of the instance's first registration under this id. */
  startedMs: number;
  /** DB ms of its last refresh. */
  seenMs: number;
  info: InstanceInfo;
  /** Whether it holds the unexpired leader lease. */
  leader: boolean;
  /** Whether it is the instance asking. */
  self: boolean;
}

export interface InstanceRegistryOptions {
  pool: pg.Pool;
  log: Logger;
  /** Default `hostname-pid-random4` (newInstanceId). */
  id?: string;
  adminUrl?: string;
  clientUrl?: string;
  info?: InstanceInfo;
  /** How often `seen_ms` is refreshed (default 1000). */
  refreshEveryMs?: number;
  /** An instance not seen for this long is not listed (default 10 000). */
  liveMs?: number;
}

/** An instance id that differs between two processes on one host and across restarts of one. */
export function newInstanceId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(2).toString('hex')}`;
}

/** Rows not refreshed for a day are someone's crashed instance: removed when an instance starts. */
const FORGET_MS = 24 * 3600_000;

/**
 * Insert or refresh this instance's row, whole: a row someone removed comes back at the
 * next refresh. `started_ms` is kept from the first insert of this process.
 */
const UPSERT = `
INSERT INTO instances (id, admin_url, client_url, started_ms, seen_ms, info)
VALUES ($1, $2, $3, ${DB_MS}, ${DB_MS}, $4::jsonb)
ON CONFLICT (id) DO UPDATE SET admin_url = excluded.admin_url, client_url = excluded.client_url, seen_ms = excluded.seen_ms, info = excluded.info`;

/**
 * The row at start: an instance restarted under the same --instance-id finds its dead
 * predecessor's row, whose `started_ms` would make ctl status show the old start (and
 * hide that it restarted).
 */
const REGISTER = `${UPSERT}, started_ms = excluded.started_ms`;

const NOTIFY = "SELECT pg_notify('llmgw', 'instances')";

interface Row {
  id: string;
  admin_url: string | null;
  client_url: string | null;
  started_ms: string;
  seen_ms: string;
  info: InstanceInfo;
  leader: boolean;
}

/**
 * The instances on one database: each registers itself, refreshes `seen_ms` (DB ms)
 * every second and removes its row when it stops; `list()` is what `ctl status` shows.
 * A row's liveness is the database's clock, like everything else in the cluster.
 */
export class InstanceRegistry {
  readonly id: string;
  private readonly pool: pg.Pool;
  private readonly log: Logger;
  private readonly adminUrl?: string;
  private readonly clientUrl?: string;
  private info: InstanceInfo;
  private readonly refreshEveryMs: number;
  private readonly liveMs: number;
  private timer?: NodeJS.Timeout;
  private failing = false;
  /** The refresh in flight: stop() waits for it, or it would put the removed row back. */
  private refreshing?: Promise<void>;

  constructor(o: InstanceRegistryOptions) {
    this.pool = o.pool;
    this.log = o.log;
    this.id = o.id ?? newInstanceId();
    if (o.adminUrl !== undefined) this.adminUrl = o.adminUrl;
    if (o.clientUrl !== undefined) this.clientUrl = o.clientUrl;
    this.info = { ...o.info };
    this.refreshEveryMs = o.refreshEveryMs ?? 1000;
    this.liveMs = o.liveMs ?? 10_000;
  }

  /** Registers (throws when the database refuses: an instance that cannot register should not start), then refreshes. */
  async start(): Promise<void> {
    await this.pool.query(`DELETE FROM instances WHERE seen_ms < ${DB_MS} - $1`, [FORGET_MS]);
    await this.write(REGISTER);
    await this.pool.query(NOTIFY);
    this.timer = setInterval(() => {
      this.refreshing ??= this.refresh().finally(() => (this.refreshing = undefined));
    }, this.refreshEveryMs);
    this.timer.unref();
  }

  /** Merges `partial` into the published info (e.g. a catalog reload's result) and tells the others. */
  async setInfo(partial: Partial<InstanceInfo>): Promise<void> {
    this.info = { ...this.info, ...partial };
    await this.write();
    await this.pool.query(NOTIFY);
  }

  /** The instances seen within `liveMs`, oldest first, with the leader marked. */
  async list(): Promise<InstanceRow[]> {
    const { rows } = await this.pool.query<Row>(
      `SELECT i.id, i.admin_url, i.client_url, i.started_ms, i.seen_ms, i.info,
              coalesce(l.holder = i.id AND l.expires_ms > ${DB_MS}, false) AS leader
         FROM instances i LEFT JOIN leader l ON l.id = 1
        WHERE i.seen_ms > ${DB_MS} - $1
        ORDER BY i.started_ms, i.id`,
      [this.liveMs],
    );
    return rows.map((r) => ({
      id: r.id,
      ...(r.admin_url !== null ? { adminUrl: r.admin_url } : {}),
      ...(r.client_url !== null ? { clientUrl: r.client_url } : {}),
      startedMs: num(r.started_ms),
      seenMs: num(r.seen_ms),
      info: r.info,
      leader: r.leader,
      self: r.id === this.id,
    }));
  }

  /** Stops refreshing and removes the row, so the others stop listing it at once. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.refreshing;
    try {
      await this.pool.query(`WITH d AS (DELETE FROM instances WHERE id = $1 RETURNING 1) SELECT pg_notify('llmgw', 'instances') FROM d`, [this.id]);
    } catch (err) {
      this.log.warn({ err: messageOf(err) }, `could not remove instance ${this.id}; the others stop listing it ${this.liveMs / 1000} s after its last refresh`);
    }
  }

  private write(sql = UPSERT): Promise<unknown> {
    return this.pool.query(sql, [this.id, this.adminUrl ?? null, this.clientUrl ?? null, JSON.stringify(this.info)]);
  }

  private async refresh(): Promise<void> {
    try {
      await this.write();
      if (this.failing) this.log.info('instance registry: refreshed again');
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.log.warn({ err: messageOf(err) }, 'instance registry: cannot refresh this instance (the others stop listing it after 10 s)');
      this.failing = true;
    }
  }
}
