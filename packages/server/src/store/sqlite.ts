import type Database from 'better-sqlite3';
import path from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { EventViewSchema, validate, type NodeReport } from '@llmgw/shared';
import type { AdminState, Replica, RolloutControl, RolloutHistory, RolloutRecord } from '../domain.js';
import { openDatabase } from './open.js';
import { secureDataDir } from './modes.js';
import type {
  EventRetention,
  NodeReportRow,
  Store,
  StoredCredential,
  StoredEvent,
  StoredKey,
  StoredNode,
  StoredReplica,
  StoredToken,
  StoredUsage,
  TokenRole,
  UsageDelta,
} from './store.js';
import { credentialOf, keyFromRow, rolloutFromRow, usageOfRow, type CredentialRow, type KeyRow, type UsageCountRow } from './rows.js';
import { MAX_USAGE_COUNT, USAGE_COLUMNS, USAGE_MINUTES_KEEP_MS, minuteOf } from './store.js';

/** About how many bytes of reports one transaction of `saveNodeReports` writes before the event loop gets a turn. */
const REPORT_CHUNK_BYTES = 1024 * 1024;

/**
 * SQLite store in `<dataDir>/llmgw.db`, WAL mode so readers never wait on the writer.
 * The constructor refuses a file that is not an intact llmgw store (`StoreOpenError`,
 * see `open.ts`); errors at run time are thrown as SQLite reports them, and
 * `GuardedStore` turns them into `store_unavailable`.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;
  readonly file: string;

  constructor(dataDir: string) {
    secureDataDir(dataDir);
    this.file = path.join(dataDir, 'llmgw.db');
    this.db = openDatabase(this.file);
  }

  async loadNodes(): Promise<StoredNode[]> {
    const rows = this.db.prepare('SELECT * FROM nodes ORDER BY id').all() as {
      id: string;
      admin_state: AdminState['state'];
      admin_reason: string | null;
      admin_changed_at: string | null;
      report: string | null;
      last_seen_ms: number | null;
      admin_drain: string | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      admin: {
        state: r.admin_state,
        ...(r.admin_reason ? { reason: r.admin_reason } : {}),
        ...(r.admin_changed_at ? { changedAt: r.admin_changed_at } : {}),
        ...(r.admin_drain ? (JSON.parse(r.admin_drain) as Pick<AdminState, 'drainDeadline' | 'force'>) : {}),
      },
      ...(r.report ? { report: JSON.parse(r.report) as NodeReport } : {}),
      ...(r.last_seen_ms != null ? { lastSeenMs: r.last_seen_ms } : {}),
    }));
  }

  async saveNodeAdmin(id: string, admin: AdminState): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO nodes (id, admin_state, admin_reason, admin_changed_at, admin_drain) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET admin_state = excluded.admin_state, admin_reason = excluded.admin_reason,
           admin_changed_at = excluded.admin_changed_at, admin_drain = excluded.admin_drain`,
      )
      .run(
        id,
        admin.state,
        admin.reason ?? null,
        admin.changedAt ?? null,
        admin.drainDeadline || admin.force ? JSON.stringify({ drainDeadline: admin.drainDeadline, force: admin.force }) : null,
      );
  }

  async saveNodeReports(rows: readonly NodeReportRow[]): Promise<void> {
    const stmt = this.db.prepare(
      `INSERT INTO nodes (id, report, last_seen_ms) VALUES (?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET report = excluded.report, last_seen_ms = excluded.last_seen_ms`,
    );
    // better-sqlite3 blocks the event loop while it writes: a batch of large reports (140
    // nodes at the 256 KiB cap is 36 MB) goes in transactions of about REPORT_CHUNK_BYTES,
    // with the listeners served in between (issue 27). Each row is a whole upsert, so a
    // batch cut short is written again whole by the next `persistReports`.
    for (let i = 0; i < rows.length;) {
      let bytes = 0;
      this.db.transaction(() => {
        while (i < rows.length && bytes < REPORT_CHUNK_BYTES) {
          const r = rows[i++]!;
          const json = JSON.stringify(r.report);
          bytes += json.length;
          stmt.run(r.id, json, r.lastSeenMs);
        }
      })();
      if (i < rows.length) await yieldToLoop();
    }
  }

  async deleteNode(id: string): Promise<void> {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM node_credentials WHERE node_id = ?').run(id);
      this.db.prepare('DELETE FROM nodes WHERE id = ?').run(id);
    })();
    // The pages its report held go back to the file system (auto_vacuum is incremental,
    // schema.ts), not to a free list that only later writes would reuse (issue 27). The
    // delete has committed: a vacuum that fails (disk full, busy) leaves the space for the
    // next one and must not turn the delete into a refusal.
    try {
      this.db.pragma('incremental_vacuum');
    } catch {
      // Kept for the next delete's vacuum.
    }
  }

  async loadCredentials(): Promise<StoredCredential[]> {
    const rows = this.db.prepare('SELECT node_id, hash, created_at, join_hash FROM node_credentials ORDER BY node_id').all() as CredentialRow[];
    return rows.map(credentialOf);
  }

  async addCredential(c: StoredCredential): Promise<boolean> {
    const r = this.db
      .prepare(
        `INSERT INTO node_credentials (node_id, hash, created_at, join_hash) VALUES (?, ?, ?, ?)
         ON CONFLICT(node_id) DO UPDATE SET hash = excluded.hash, created_at = excluded.created_at
         WHERE node_credentials.join_hash IS NOT NULL AND node_credentials.join_hash = excluded.join_hash`,
      )
      .run(c.nodeId, c.hash, c.createdAt, c.joinHash ?? null);
    return r.changes === 1;
  }

  async loadReplicas(): Promise<StoredReplica[]> {
    const rows = this.db.prepare('SELECT data FROM replicas ORDER BY id').all() as { data: string }[];
    return rows.map((r) => JSON.parse(r.data) as StoredReplica);
  }

  /** One instance only on SQLite: there is no lease, so a fence has nothing to check. */
  async writeReplicas(save: readonly Replica[], remove: readonly string[]): Promise<void> {
    const upsert = this.db.prepare(
      `INSERT INTO replicas (id, model, data) VALUES (?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET model = excluded.model, data = excluded.data`,
    );
    const del = this.db.prepare('DELETE FROM replicas WHERE id = ?');
    this.db.transaction(() => {
      for (const replica of save) {
        const { apiKey: _derived, ...data } = replica;
        upsert.run(data.id, data.model, JSON.stringify(data));
      }
      for (const id of remove) del.run(id);
    })();
  }

  async loadKeys(): Promise<StoredKey[]> {
    const rows = this.db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all() as (Omit<KeyRow, 'models'> & { models: string })[];
    return rows.map((r) => keyFromRow({ ...r, models: JSON.parse(r.models) as string[] }));
  }

  async saveKey(k: StoredKey): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO api_keys (id, name, hash, prefix, models, rpm, max_concurrent, tpm, priority, expires_at, created_at, revoked_at)
         VALUES (@id, @name, @hash, @prefix, @models, @rpm, @max_concurrent, @tpm, @priority, @expires_at, @created_at, @revoked_at)
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, models = excluded.models, rpm = excluded.rpm,
           max_concurrent = excluded.max_concurrent, tpm = excluded.tpm, priority = excluded.priority, expires_at = excluded.expires_at, revoked_at = COALESCE(api_keys.revoked_at, excluded.revoked_at)`,
      )
      .run({
        id: k.id,
        name: k.name,
        hash: k.hash,
        prefix: k.prefix,
        models: JSON.stringify(k.models),
        rpm: k.rpm ?? null,
        max_concurrent: k.maxConcurrent ?? null,
        tpm: k.tpm ?? null,
        priority: k.priority ?? null,
        expires_at: k.expiresAt ?? null,
        created_at: k.createdAt,
        revoked_at: k.revokedAt ?? null,
      });
  }

  async loadTokens(): Promise<StoredToken[]> {
    const rows = this.db.prepare('SELECT * FROM admin_tokens ORDER BY created_at, id').all() as {
      id: string;
      name: string;
      role: TokenRole;
      hash: string;
      prefix: string;
      created_at: string;
      revoked_at: string | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      role: r.role,
      hash: r.hash,
      prefix: r.prefix,
      createdAt: r.created_at,
      ...(r.revoked_at ? { revokedAt: r.revoked_at } : {}),
    }));
  }

  async saveToken(t: StoredToken): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO admin_tokens (id, name, role, hash, prefix, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, revoked_at = COALESCE(admin_tokens.revoked_at, excluded.revoked_at)`,
      )
      .run(t.id, t.name, t.role, t.hash, t.prefix, t.createdAt, t.revokedAt ?? null);
  }

  async addUsage(deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
    // MIN holds each sum at MAX_USAGE_COUNT: past 2^63 SQLite would turn it into a float.
    const saturating = (table: string) => USAGE_COLUMNS.map((c) => `${c} = MIN(${table}.${c} + excluded.${c}, ${MAX_USAGE_COUNT})`).join(', ');
    const set = saturating('usage');
    const total = this.db.prepare(
      `INSERT INTO usage (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens)
       VALUES (@keyId, @model, @requests, @errors, @cancelled, @promptTokens, @completionTokens)
       ON CONFLICT(key_id, model) DO UPDATE SET ${set}`,
    );
    const minute = this.db.prepare(
      `INSERT INTO usage_minutes (key_id, model, minute_ms, requests, errors, cancelled, prompt_tokens, completion_tokens)
       VALUES (@keyId, @model, @minuteMs, @requests, @errors, @cancelled, @promptTokens, @completionTokens)
       ON CONFLICT(key_id, model, minute_ms) DO UPDATE SET ${saturating('usage_minutes')}`,
    );
    const prune = this.db.prepare('DELETE FROM usage_minutes WHERE minute_ms < ?');
    // Rows are typed INTEGER loosely in SQLite: a value it cannot bind (not a number) is
    // the row's fault, skipped and returned; a failure of the file throws out of the
    // transaction, which writes nothing.
    const refused: UsageDelta[] = [];
    this.db.transaction((ds: readonly UsageDelta[]) => {
      let newest = -Infinity;
      for (const d of ds) {
        const { minuteMs, ...row } = d;
        try {
          total.run(row);
        } catch (err) {
          if (!(err instanceof TypeError) && !(err instanceof RangeError)) throw err;
          refused.push(d);
          continue;
        }
        if (minuteMs === undefined) continue;
        minute.run({ ...row, minuteMs });
        newest = Math.max(newest, minuteMs);
      }
      // Pruned by the batch's own time, not a clock: what is kept is the last 31 days written.
      if (newest > -Infinity) prune.run(newest - USAGE_MINUTES_KEEP_MS);
    })(deltas);
    return refused;
  }

  async loadUsage(sinceMs?: number): Promise<StoredUsage[]> {
    // total(), not sum(): sum() of saturated minutes overflows SQLite's integers and throws;
    // held at MAX_USAGE_COUNT as the totals are, and as PostgreSQL's sums are (pg-usage.ts).
    const sums = USAGE_COLUMNS.map((c) => `CAST(MIN(total(u.${c}), ${MAX_USAGE_COUNT}) AS INTEGER) AS ${c}`).join(', ');
    const stmt =
      sinceMs === undefined
        ? this.db.prepare(
            `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, u.requests, u.errors, u.cancelled, u.prompt_tokens, u.completion_tokens
             FROM usage u LEFT JOIN api_keys k ON k.id = u.key_id ORDER BY key_name, u.model`,
          )
        : this.db.prepare(
            `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, ${sums}
             FROM usage_minutes u LEFT JOIN api_keys k ON k.id = u.key_id WHERE u.minute_ms >= ? GROUP BY u.key_id, u.model ORDER BY key_name, u.model`,
          );
    const rows = (sinceMs === undefined ? stmt.all() : stmt.all(minuteOf(sinceMs))) as (UsageCountRow & { key_name: string })[];
    return rows.map((r) => ({ ...usageOfRow(r), keyName: r.key_name }));
  }

  /** Every kept minute row of `usage_minutes`, as written: what `llmgw-server migrate` copies so `ctl usage --since` and TPM windows survive the move. */
  loadUsageMinutes(): Required<UsageDelta>[] {
    const rows = this.db
      .prepare(`SELECT key_id, model, minute_ms, ${USAGE_COLUMNS.join(', ')} FROM usage_minutes ORDER BY key_id, model, minute_ms`)
      .all() as (UsageCountRow & { minute_ms: number })[];
    return rows.map((r) => ({ ...usageOfRow(r), minuteMs: r.minute_ms }));
  }

  async addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]> {
    const insert = this.db.prepare('INSERT OR REPLACE INTO events (id, time_ms, data) VALUES (?, ?, ?)');
    this.db.transaction(() => {
      for (const e of events) insert.run(e.id, Date.parse(e.time), JSON.stringify(e));
      this.db.prepare('DELETE FROM events WHERE time_ms < ? OR id <= (SELECT MAX(id) FROM events) - ?').run(keep.sinceMs, keep.maxRows);
    })();
    return [...events];
  }

  async loadEvents(limit: number, afterId = -1): Promise<StoredEvent[]> {
    const rows = this.db.prepare('SELECT data FROM (SELECT id, data FROM events WHERE id > ? ORDER BY id DESC LIMIT ?) ORDER BY id').all(afterId, limit) as {
      data: string;
    }[];
    // A row that is not an event (hand-edited, torn) is skipped, not thrown: one bad row
    // would otherwise drop the whole history, and the log, starting again at id 1, would
    // overwrite the kept rows and send watchers' cursors back. Its fields are read by
    // every list (`nodes.includes`), so a row that parses but lacks them is skipped too.
    return rows.flatMap((r) => {
      let data: unknown;
      try {
        data = JSON.parse(r.data);
      } catch {
        return [];
      }
      return validate(EventViewSchema, data).ok ? [data as StoredEvent] : [];
    });
  }

  async loadRollouts(): Promise<RolloutRecord[]> {
    const rows = this.db.prepare('SELECT model, history, control FROM rollouts ORDER BY model').all() as {
      model: string;
      history: string | null;
      control: string | null;
    }[];
    return rows.map((r) => rolloutFromRow(r.model, parseJson(r.history), parseJson(r.control)));
  }

  async saveRolloutHistory(model: string, h: RolloutHistory): Promise<void> {
    this.db
      .prepare('INSERT INTO rollouts (model, history) VALUES (?, ?) ON CONFLICT(model) DO UPDATE SET history = excluded.history')
      .run(model, JSON.stringify(h));
  }

  async saveRolloutControl(model: string, c: RolloutControl): Promise<void> {
    this.db
      .prepare('INSERT INTO rollouts (model, control) VALUES (?, ?) ON CONFLICT(model) DO UPDATE SET control = excluded.control')
      .run(model, JSON.stringify(c));
  }

  async probe(): Promise<void> {
    // Rewriting the schema version commits a page like any write does, so it fails
    // exactly when a real write would, and changes nothing.
    const v = this.db.pragma('user_version', { simple: true }) as number;
    this.db.pragma(`user_version = ${v}`);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

/** JSON text from a column, or undefined when it is missing or not JSON (see `rolloutFromRow`). */
function parseJson(text: string | null): unknown {
  if (text === null) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
