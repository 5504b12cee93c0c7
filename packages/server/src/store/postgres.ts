import pg from 'pg';
import type { Logger } from 'pino';
import type { AdminState, Replica, RolloutControl, RolloutHistory, RolloutRecord } from '../domain.js';
import { DomainError } from '../errors.js';
import { StoreOpenError } from './open.js';
import { connectError, describeUrl } from './pg-open.js';
import { DB_MS, migratePostgres, PG_SCHEMA_VERSION } from './pg-schema.js';
import type {
  EventRetention,
  Fence,
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
import { addEventRows, loadEventRows } from './pg-events.js';
import { addUsageRows, loadUsageRows } from './pg-usage.js';
import { loadChangedRows, loadHeadRows, loadRowsOf, NODE_COLUMNS, saveReportRows, type OwnBatches } from './pg-nodes.js';
import { credentialOf, keyFromRow, rolloutFromRow, toNode, type CredentialRow, type KeyRow, type NodeRow } from './rows.js';

/** The topics of the `llmgw` NOTIFY channel: what another instance must reload. */
export type Topic = 'replicas' | 'keys' | 'tokens' | 'credentials' | 'nodes' | 'events' | 'instances' | 'leader' | 'join-token';

/** The channel every instance LISTENs on; the payload is a `Topic`. */
export const CHANNEL = 'llmgw';

export interface PostgresOptions {
  log?: Logger;
  /** Connections in the pool (default 10). */
  poolSize?: number;
}

/**
 * The store on PostgreSQL, shared by several llmgw-server instances. Same behaviour as
 * `SqliteStore` for everything in `Store`; besides, it sends a NOTIFY on channel `llmgw`
 * in the same transaction as each write another instance must see (`Topic`), refuses a
 * fenced write from an instance whose leader lease is gone, and gives the cluster code
 * the pool, the database clock and the node rows changed since a cursor.
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  private readonly ownBatches: OwnBatches = [];

  private constructor(
    readonly pool: pg.Pool,
    /** `user@host:port/database`, for messages. */
    readonly where: string,
  ) {}

  /**
   * Connects, checks the database is llmgw's (or empty) and migrates it. Refuses with a
   * one-line `StoreOpenError` a database it cannot reach or log in to, one that holds
   * other tables, or one from a newer server.
   */
  static async open(url: string, opts: PostgresOptions = {}): Promise<PostgresStore> {
    const { where, password } = describeUrl(url);
    // A database that stops answering (paused, packets dropped) must not hang a query, a
    // renew or a shutdown forever: every statement here is short, so 5 s is a dead server,
    // and TCP keepalive notices a connection that went silent while idle.
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.poolSize ?? 10,
      connectionTimeoutMillis: 10_000,
      query_timeout: 5_000,
      keepAlive: true,
      application_name: 'llmgw-server',
    });
    // A pooled connection that dies while idle emits 'error' on the pool; without a
    // listener that would end the process. The next query gets a new connection.
    pool.on('error', (err) => opts.log?.warn({ err: err.message }, 'PostgreSQL connection lost while idle'));
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      await pool.end().catch(() => {});
      throw connectError(err, where, password);
    }
    try {
      const from = await migratePostgres(client, where);
      opts.log?.info({ database: where, schemaFrom: from, schema: PG_SCHEMA_VERSION }, 'PostgreSQL store open');
    } catch (err) {
      client.release();
      await pool.end().catch(() => {});
      if (err instanceof StoreOpenError) throw err;
      throw new StoreOpenError(
        `cannot set up the llmgw schema in ${where} (${oneLine(err, password)}): check that the user may create tables there, then start again`,
      );
    }
    client.release();
    return new PostgresStore(pool, where);
  }

  /** Runs `fn` in one transaction on one pooled connection: all of it commits, or none. */
  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.pool.connect();
    let failed: Error | undefined;
    try {
      await c.query('BEGIN');
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      failed = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      // A connection whose statement failed or timed out is closed, not reused.
      c.release(failed);
    }
  }

  private static notify(c: pg.ClientBase, ...topics: Topic[]): Promise<unknown> {
    return Promise.all(topics.map((t) => c.query('SELECT pg_notify($1, $2)', [CHANNEL, t])));
  }

  async loadNodes(): Promise<StoredNode[]> {
    const { rows } = await this.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} FROM nodes n ORDER BY n.id COLLATE "C"`);
    return rows.map(toNode);
  }

  /**
   * The node rows written since `sinceMs` (DB ms), less those this store's own batches
   * of reports wrote (`loadChangedRows`), and the database's clock in the same query: the caller's next cursor, so no
   * commit between two pulls is missed for want of a clock that runs differently.
   */
  async loadNodesChanged(sinceMs: number): Promise<{ nodes: StoredNode[]; dbNowMs: number }> {
    return loadChangedRows(this.pool, this.ownBatches, sinceMs);
  }

  /** Every node row but its report and shards, with the database's clock (the full reload's first read; `loadHeadRows`). */
  loadNodeHeads(): Promise<{ heads: StoredNode[]; dbNowMs: number }> {
    return loadHeadRows(this.pool);
  }

  /** The whole rows of `ids`. */
  loadNodesById(ids: readonly string[]): Promise<StoredNode[]> {
    return loadRowsOf(this.pool, ids);
  }

  /** The database's clock in epoch ms: the one clock liveness and leases are judged on. */
  async dbNowMs(): Promise<number> {
    const { rows } = await this.pool.query<{ ms: string }>(`SELECT ${DB_MS} AS ms`);
    return Number(rows[0]!.ms);
  }

  async saveNodeAdmin(id: string, admin: AdminState): Promise<void> {
    await this.tx(async (c) => {
      await c.query(
        `INSERT INTO nodes (id, admin, updated_ms) VALUES ($1, $2, ${DB_MS})
         ON CONFLICT (id) DO UPDATE SET admin = excluded.admin, updated_ms = excluded.updated_ms`,
        [id, JSON.stringify(admin)],
      );
      await PostgresStore.notify(c, 'nodes');
    });
  }

  /**
   * One statement for the whole batch (the heartbeat path). `last_seen_ms` is the
   * database's clock at the write, not the row's own: liveness is the database's view.
   * A node not yet stored is created `ready`. Rows are written in id order, so two
   * instances writing overlapping batches lock them in the same order. Resolves that
   * clock (every row written gets it), by which the instance knows its own rows in a pull.
   */
  async saveNodeReports(rows: readonly NodeReportRow[]): Promise<number | void> {
    return saveReportRows(this.pool, this.ownBatches, rows);
  }

  async deleteNode(id: string): Promise<void> {
    await this.tx(async (c) => {
      await c.query('DELETE FROM node_credentials WHERE node_id = $1', [id]);
      await c.query('DELETE FROM nodes WHERE id = $1', [id]);
      await PostgresStore.notify(c, 'nodes', 'credentials');
    });
  }

  async loadCredentials(): Promise<StoredCredential[]> {
    const { rows } = await this.pool.query<CredentialRow>('SELECT node_id, hash, created_at, join_hash FROM node_credentials ORDER BY node_id COLLATE "C"');
    return rows.map(credentialOf);
  }

  async addCredential(cred: StoredCredential): Promise<boolean> {
    return this.tx(async (c) => {
      // The same join again (its join id's hash matches) replaces the credential; any other join of a taken id does nothing.
      const r = await c.query(
        `INSERT INTO node_credentials (node_id, hash, created_at, join_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (node_id) DO UPDATE SET hash = excluded.hash, created_at = excluded.created_at
         WHERE node_credentials.join_hash IS NOT NULL AND node_credentials.join_hash = excluded.join_hash`,
        [cred.nodeId, cred.hash, cred.createdAt, cred.joinHash ?? null],
      );
      if (r.rowCount !== 1) return false;
      await PostgresStore.notify(c, 'credentials');
      return true;
    });
  }

  async loadReplicas(): Promise<StoredReplica[]> {
    const { rows } = await this.pool.query<{ data: StoredReplica }>('SELECT data FROM replicas ORDER BY id COLLATE "C"');
    return rows.map((r) => r.data);
  }

  /**
   * One transaction. With `fence`, it first touches the lease row, which must still be
   * held by `fence.holder` at `fence.epoch` and not expired on the database's clock; the
   * row lock then keeps a takeover waiting until this commits, so the plan lands only
   * under a lease that held throughout. Engine keys are never written.
   */
  async writeReplicas(save: readonly Replica[], remove: readonly string[], fence?: Fence): Promise<void> {
    if (!save.length && !remove.length && !fence) return;
    const latest = [...new Map(save.map((r) => [r.id, r])).values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    await this.tx(async (c) => {
      if (fence) {
        const held = await c.query(`UPDATE leader SET epoch = epoch WHERE id = 1 AND holder = $1 AND epoch = $2 AND expires_ms > ${DB_MS} RETURNING 1`, [
          fence.holder,
          fence.epoch,
        ]);
        if (!held.rowCount) {
          throw new DomainError(
            'not_leader',
            `this instance is no longer the leader (lease epoch ${fence.epoch} was taken over or expired); its plan was not written`,
          );
        }
      }
      if (latest.length) {
        await c.query(
          `INSERT INTO replicas (id, data, updated_ms) SELECT r->>'id', r, t.ms
           FROM jsonb_array_elements($1::jsonb) AS r, (SELECT ${DB_MS} AS ms) t
           ON CONFLICT (id) DO UPDATE SET data = excluded.data, updated_ms = excluded.updated_ms`,
          [JSON.stringify(latest.map(({ apiKey: _derived, ...data }) => data))],
        );
      }
      if (remove.length) await c.query('DELETE FROM replicas WHERE id = ANY($1::text[])', [[...remove]]);
      if (latest.length || remove.length) await PostgresStore.notify(c, 'replicas');
    });
  }

  async loadKeys(): Promise<StoredKey[]> {
    const { rows } = await this.pool.query<KeyRow>('SELECT * FROM api_keys ORDER BY created_at COLLATE "C", id COLLATE "C"');
    return rows.map(keyFromRow);
  }

  async saveKey(k: StoredKey): Promise<void> {
    await this.tx(async (c) => {
      await c.query(
        `INSERT INTO api_keys (id, name, hash, prefix, models, rpm, max_concurrent, expires_at, created_at, revoked_at, priority, tpm)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, models = excluded.models, rpm = excluded.rpm,
           max_concurrent = excluded.max_concurrent, tpm = excluded.tpm, priority = excluded.priority, expires_at = excluded.expires_at, revoked_at = COALESCE(api_keys.revoked_at, excluded.revoked_at)`,
        [
          k.id,
          k.name,
          k.hash,
          k.prefix,
          JSON.stringify(k.models),
          k.rpm ?? null,
          k.maxConcurrent ?? null,
          k.expiresAt ?? null,
          k.createdAt,
          k.revokedAt ?? null,
          k.priority ?? null,
          k.tpm ?? null,
        ],
      );
      await PostgresStore.notify(c, 'keys');
    });
  }

  async loadTokens(): Promise<StoredToken[]> {
    const { rows } = await this.pool.query<{
      id: string;
      name: string;
      role: TokenRole;
      hash: string;
      prefix: string;
      created_at: string;
      revoked_at: string | null;
    }>('SELECT * FROM admin_tokens ORDER BY created_at COLLATE "C", id COLLATE "C"');
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
    await this.tx(async (c) => {
      await c.query(
        `INSERT INTO admin_tokens (id, name, role, hash, prefix, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, revoked_at = COALESCE(admin_tokens.revoked_at, excluded.revoked_at)`,
        [t.id, t.name, t.role, t.hash, t.prefix, t.createdAt, t.revokedAt ?? null],
      );
      await PostgresStore.notify(c, 'tokens');
    });
  }

  async addUsage(deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
    return addUsageRows(this.pool, deltas);
  }

  async loadUsage(sinceMs?: number): Promise<StoredUsage[]> {
    return loadUsageRows(this.pool, sinceMs);
  }

  async addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]> {
    return this.tx(async (c) => {
      const ids = await addEventRows(c, events, keep);
      if (events.length) await PostgresStore.notify(c, 'events');
      return events.map((e, i) => ({ ...e, id: ids[i]! }));
    });
  }

  async loadEvents(limit: number, afterId?: number): Promise<StoredEvent[]> {
    return loadEventRows(this.pool, limit, afterId);
  }

  /**
   * A secret every instance shares (the admin and join tokens, the engine-key secret,
   * the CA): the first instance to ask stores `fallback()`, and everyone gets that value.
   */
  async sharedSecret(name: string, fallback: () => string): Promise<string> {
    const get = async () => (await this.pool.query<{ value: string }>('SELECT value FROM secrets WHERE name = $1', [name])).rows[0]?.value;
    const found = await get();
    if (found !== undefined) return found;
    await this.pool.query('INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, fallback()]);
    const stored = await get();
    if (stored === undefined) throw new Error(`secret ${name} vanished right after it was stored`);
    return stored;
  }

  /** Replaces a shared secret (a join token rotation) and tells the other instances ('join-token' for that one). */
  async setSharedSecret(name: string, value: string): Promise<void> {
    await this.tx(async (c) => {
      await c.query('INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value', [name, value]);
      if (name === 'join-token') await PostgresStore.notify(c, 'join-token');
    });
  }

  /** A shared secret as stored now; undefined when none is. */
  async readSharedSecret(name: string): Promise<string | undefined> {
    return (await this.pool.query<{ value: string }>('SELECT value FROM secrets WHERE name = $1', [name])).rows[0]?.value;
  }

  /** A write that changes nothing: it fails exactly when writes fail (unreachable, read-only standby). */
  async loadRollouts(): Promise<RolloutRecord[]> {
    const { rows } = await this.pool.query<{ model: string; history: unknown; control: unknown }>(
      'SELECT model, history, control FROM rollouts ORDER BY model COLLATE "C"',
    );
    return rows.map((r) => rolloutFromRow(r.model, r.history, r.control));
  }

  async saveRolloutHistory(model: string, h: RolloutHistory): Promise<void> {
    await this.pool.query('INSERT INTO rollouts (model, history) VALUES ($1, $2) ON CONFLICT (model) DO UPDATE SET history = excluded.history', [
      model,
      JSON.stringify(h),
    ]);
  }

  async saveRolloutControl(model: string, c: RolloutControl): Promise<void> {
    await this.pool.query('INSERT INTO rollouts (model, control) VALUES ($1, $2) ON CONFLICT (model) DO UPDATE SET control = excluded.control', [
      model,
      JSON.stringify(c),
    ]);
  }

  async probe(): Promise<void> {
    await this.pool.query('UPDATE schema_version SET version = version WHERE version = (SELECT max(version) FROM schema_version)');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

function oneLine(err: unknown, password?: string): string {
  let line = (err instanceof Error ? err.message : String(err)).split('\n', 1)[0]!.slice(0, 200);
  if (password) line = line.split(password).join('***');
  return line;
}
