import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { localCa, localSecret, SECRET_NAMES, type SecretName } from './secrets.js';
import { openReadOnly, StoreOpenError } from '../store/open.js';
import { describeUrl } from '../store/pg-open.js';
import { DB_MS } from '../store/pg-schema.js';
import { CHANNEL, PostgresStore, type Topic } from '../store/postgres.js';
import type { RolloutRecord } from '../domain.js';
import { SqliteStore } from '../store/sqlite.js';
import {
  USAGE_COLUMNS,
  type StoredCredential,
  type StoredEvent,
  type StoredKey,
  type StoredNode,
  type StoredReplica,
  type StoredToken,
  type StoredUsage,
  type UsageDelta,
} from '../store/store.js';

/** Everything `llmgw-server migrate` copies: a SQLite store's rows and its data directory's secrets. */
export interface SqliteSnapshot {
  nodes: StoredNode[];
  credentials: StoredCredential[];
  replicas: StoredReplica[];
  keys: StoredKey[];
  usage: StoredUsage[];
  /** Per-minute usage (the last 31 days), so windows and TPM quotas count what was used before the move. */
  usageMinutes: Required<UsageDelta>[];
  tokens: StoredToken[];
  events: StoredEvent[];
  /** Revisions, halts and pauses of rollouts (not in the summary: they are history, not the fleet). */
  rollouts: RolloutRecord[];
  /** By their name in the `secrets` table; a secret the data directory lacks is absent. */
  secrets: Partial<Record<SecretName, string>>;
}

/** More events than a store keeps (EventRetention's 10,000): all of them. */
const ALL_EVENTS = 1_000_000;

/**
 * Reads a SQLite store without changing it: opened read-only with the checks of a
 * start (a corrupt or foreign file is refused with the same line), copied whole with
 * SQLite's backup (a consistent snapshot, WAL included) into a temporary directory,
 * where SqliteStore brings the copy to the current schema and loads it. The secrets
 * come from the store's own data directory, the directory of the file.
 */
export async function readSqlite(file: string): Promise<SqliteSnapshot> {
  const source = openReadOnly(file);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-migrate-'));
  try {
    try {
      await source.backup(path.join(tmp, 'llmgw.db'));
    } finally {
      source.close();
    }
    const copy = new SqliteStore(tmp);
    try {
      const dir = path.dirname(file);
      const secrets: Partial<Record<SecretName, string>> = {};
      for (const name of SECRET_NAMES) {
        const value = name === 'tls/ca' ? localCa(dir) : localSecret(dir, name);
        if (value !== undefined) secrets[name] = value;
      }
      return {
        nodes: await copy.loadNodes(),
        credentials: await copy.loadCredentials(),
        replicas: await copy.loadReplicas(),
        keys: await copy.loadKeys(),
        usage: await copy.loadUsage(),
        usageMinutes: copy.loadUsageMinutes(),
        tokens: await copy.loadTokens(),
        events: await copy.loadEvents(ALL_EVENTS),
        rollouts: await copy.loadRollouts(),
        secrets,
      };
    } finally {
      await copy.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The tables a migration fills, with the word its summary uses; any row in one of them means the database is in use. */
const TABLES = [
  ['nodes', 'node'],
  ['node_credentials', 'node credential'],
  ['replicas', 'replica'],
  ['api_keys', 'key'],
  ['usage', 'usage row'],
  ['admin_tokens', 'token'],
  ['events', 'event'],
] as const;

/** What a migration wrote, per table of `TABLES`, and which secrets. */
export interface MigrateResult {
  counts: Record<(typeof TABLES)[number][0], number>;
  secrets: SecretName[];
}

/**
 * Copies a snapshot into the llmgw PostgreSQL database at `url` (opened and made current
 * by PostgresStore.open, as a start would), in one transaction, with plain SQL: PostgresStore's writes are one
 * transaction each, and a half-copied fleet must never be left. Replica ids are kept,
 * so the agents' engines are adopted, not relaunched; event ids too, with the sequence
 * moved past them. Refuses (StoreOpenError, nothing written) a database that already
 * holds any of the rows it would copy. The secrets replace any an instance started on
 * the empty database made, so the SQLite install's join token and engine keys hold.
 */
export async function writePostgres(snap: SqliteSnapshot, url: string): Promise<MigrateResult> {
  // Connects, checks and migrates as a start does, with the same one-line refusals.
  const store = await PostgresStore.open(url);
  const client = await store.pool.connect();
  try {
    await client.query('BEGIN');
    try {
      // No instance may write between the check and the copy.
      await client.query(`LOCK TABLE ${TABLES.map(([t]) => t).join(', ')}, secrets IN SHARE ROW EXCLUSIVE MODE`);
      const held = await client.query<Record<string, string>>(`SELECT ${TABLES.map(([t]) => `(SELECT count(*) FROM ${t})::text AS ${t}`).join(', ')}`);
      const inUse = TABLES.flatMap(([t, word]) => {
        const n = Number(held.rows[0]?.[t] ?? 0);
        return n ? [plural(n, word)] : [];
      });
      if (inUse.length) {
        throw new StoreOpenError(
          `database ${store.where} already holds ${inUse.join(', ')}: migrate only into an empty llmgw database (create a new one and give its URL), so nothing there is overwritten or mixed with this fleet`,
        );
      }
      await copyRows(client, snap);
      for (const [name, value] of Object.entries(snap.secrets)) {
        await client.query('INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value', [name, value]);
      }
      // Instances already running on this database reload what changed.
      for (const topic of ['nodes', 'credentials', 'replicas', 'keys', 'tokens', 'events'] satisfies Topic[])
        await client.query('SELECT pg_notify($1, $2)', [CHANNEL, topic]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    client.release();
    await store.close();
  }
  return {
    counts: {
      nodes: snap.nodes.length,
      node_credentials: snap.credentials.length,
      replicas: snap.replicas.length,
      api_keys: snap.keys.length,
      usage: snap.usage.length,
      admin_tokens: snap.tokens.length,
      events: snap.events.length,
    },
    secrets: SECRET_NAMES.filter((n) => snap.secrets[n] !== undefined),
  };
}

/** Each table in one statement: the rows travel as one JSON array, unpacked by jsonb_to_recordset. */
async function copyRows(client: pg.ClientBase, snap: SqliteSnapshot): Promise<void> {
  const insert = (sql: string, rows: unknown[]) => (rows.length ? client.query(sql, [JSON.stringify(rows)]) : Promise.resolve());
  await insert(
    `INSERT INTO nodes (id, admin, report, last_seen_ms, updated_ms)
     SELECT id, admin, report, last_seen_ms, ${DB_MS} FROM jsonb_to_recordset($1::jsonb) AS x(id text, admin jsonb, report jsonb, last_seen_ms bigint)`,
    snap.nodes.map((n) => ({ id: n.id, admin: n.admin, report: n.report ?? null, last_seen_ms: n.lastSeenMs ?? null })),
  );
  await insert(
    `INSERT INTO node_credentials (node_id, hash, created_at, join_hash)
     SELECT node_id, hash, created_at, join_hash FROM jsonb_to_recordset($1::jsonb) AS x(node_id text, hash text, created_at text, join_hash text)`,
    // The join hash too: an agent whose join reply was lost in the move retries the same join.
    snap.credentials.map((c) => ({ node_id: c.nodeId, hash: c.hash, created_at: c.createdAt, join_hash: c.joinHash ?? null })),
  );
  await insert(
    `INSERT INTO replicas (id, data, updated_ms) SELECT data->>'id', data, ${DB_MS} FROM jsonb_array_elements($1::jsonb) AS x(data)`,
    // No engine key is ever stored: each instance derives it from the shared engine-key-secret.
    snap.replicas.map(({ apiKey: _derived, ...r }) => r),
  );
  await insert(
    `INSERT INTO api_keys (id, name, hash, prefix, models, rpm, max_concurrent, tpm, priority, expires_at, created_at, revoked_at)
     SELECT id, name, hash, prefix, models, rpm, max_concurrent, tpm, priority, expires_at, created_at, revoked_at FROM jsonb_to_recordset($1::jsonb)
       AS x(id text, name text, hash text, prefix text, models jsonb, rpm integer, max_concurrent integer, tpm bigint, priority text, expires_at text, created_at text, revoked_at text)`,
    snap.keys.map((k) => ({
      id: k.id,
      name: k.name,
      hash: k.hash,
      prefix: k.prefix,
      models: k.models,
      rpm: k.rpm ?? null,
      max_concurrent: k.maxConcurrent ?? null,
      tpm: k.tpm ?? null,
      priority: k.priority ?? null,
      expires_at: k.expiresAt ?? null,
      created_at: k.createdAt,
      revoked_at: k.revokedAt ?? null,
    })),
  );
  // Totals and minutes alike: the same counting columns, `minute_ms` only on the minutes.
  const counts = (u: UsageDelta) => ({
    key_id: u.keyId,
    model: u.model,
    ...(u.minuteMs !== undefined ? { minute_ms: u.minuteMs } : {}),
    requests: u.requests,
    errors: u.errors,
    cancelled: u.cancelled,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
  });
  const typed = USAGE_COLUMNS.map((c) => `${c} bigint`).join(', ');
  await insert(
    `INSERT INTO usage (key_id, model, ${USAGE_COLUMNS.join(', ')})
     SELECT key_id, model, ${USAGE_COLUMNS.join(', ')} FROM jsonb_to_recordset($1::jsonb) AS x(key_id text, model text, ${typed})`,
    snap.usage.map(counts),
  );
  await insert(
    `INSERT INTO usage_minutes (key_id, model, minute_ms, ${USAGE_COLUMNS.join(', ')})
     SELECT key_id, model, minute_ms, ${USAGE_COLUMNS.join(', ')} FROM jsonb_to_recordset($1::jsonb) AS x(key_id text, model text, minute_ms bigint, ${typed})`,
    snap.usageMinutes.map(counts),
  );
  await insert(
    `INSERT INTO admin_tokens (id, name, role, hash, prefix, created_at, revoked_at)
     SELECT id, name, role, hash, prefix, created_at, revoked_at FROM jsonb_to_recordset($1::jsonb)
       AS x(id text, name text, role text, hash text, prefix text, created_at text, revoked_at text)`,
    snap.tokens.map((t) => ({
      id: t.id,
      name: t.name,
      role: t.role,
      hash: t.hash,
      prefix: t.prefix,
      created_at: t.createdAt,
      revoked_at: t.revokedAt ?? null,
    })),
  );
  await insert(
    `INSERT INTO rollouts (model, history, control) SELECT model, history, control FROM jsonb_to_recordset($1::jsonb) AS x(model text, history jsonb, control jsonb)`,
    snap.rollouts.map(({ model, paused, resumed, ...history }) => ({
      model,
      history,
      control: { ...(paused ? { paused } : {}), ...(resumed ? { resumed } : {}) },
    })),
  );
  if (snap.events.length) {
    await insert(
      `INSERT INTO events (id, time_ms, data) SELECT id, time_ms, data FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, time_ms bigint, data jsonb)`,
      // As PostgresStore keeps them: the row's id is the event's, not repeated in its JSON.
      snap.events.map(({ id, ...data }) => ({ id, time_ms: Date.parse(data.time), data })),
    );
    // The next event an instance writes gets an id after every migrated one: watchers' cursors stay valid.
    await client.query(`SELECT setval(pg_get_serial_sequence('events', 'id'), (SELECT max(id) FROM events))`);
  }
}

/** What a secret the SQLite install lacks means for the instances (the first one starting makes it). */
const MISSING: Record<SecretName, string> = {
  'admin-token': 'give every instance the same LLMGW_ADMIN_TOKEN, as this install had, or the first instance makes a new admin token',
  'join-token': 'give every instance the same LLMGW_JOIN_TOKEN, as this install had, or the first instance makes a new one (agents must then join again)',
  'engine-key-secret': 'the first instance makes a new one, so engine keys change and the agents restart their engines',
  'tls/ca': 'the first instance makes a new CA (unless --tls-cert is given), so agents need a join token pinning it',
};

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * `llmgw-server migrate --from-sqlite FILE --database-url URL`: the summary line on
 * success, and a note for each secret the data directory lacked; throws a one-line
 * error otherwise. FILE may also be the data directory.
 */
export async function migrateSqliteToPostgres(from: string, url: string): Promise<{ summary: string; notes: string[] }> {
  let file = path.resolve(from);
  if (fs.statSync(file, { throwIfNoEntry: false })?.isDirectory()) file = path.join(file, 'llmgw.db');
  const snap = await readSqlite(file);
  let done: MigrateResult;
  try {
    done = await writePostgres(snap, url);
  } catch (err) {
    if (err instanceof StoreOpenError) throw err;
    // The transaction was rolled back (or never began): say so, on one line, without the password.
    const { where, password } = describeUrl(url);
    let said = ((err as Error).message ?? String(err)).split('\n', 1)[0]!;
    if (password) said = said.split(password).join('***');
    throw new Error(`cannot migrate ${file} to ${where} (${said}): nothing was written; fix the cause and run migrate again`, { cause: err });
  }
  const c = done.counts;
  const rows = [
    plural(c.nodes, 'node'),
    plural(c.node_credentials, 'node credential'),
    plural(c.replicas, 'replica'),
    plural(c.api_keys, 'key'),
    plural(c.usage, 'usage row'),
    plural(c.admin_tokens, 'token'),
    plural(c.events, 'event'),
  ];
  const secrets = done.secrets.length ? `secrets ${done.secrets.join(', ')}` : 'no secrets';
  const dir = path.dirname(file);
  const notes = SECRET_NAMES.filter((n) => !done.secrets.includes(n)).map(
    (n) => `${path.join(dir, n === 'tls/ca' ? 'tls/ca.pem' : n)} is absent: ${MISSING[n]}`,
  );
  return { summary: `migrated ${rows.join(', ')} and ${secrets} from ${file} to ${describeUrl(url).where}`, notes };
}

/** `llmgw-server migrate --help`, after the options. */
export const MIGRATE_HELP = `
The upgrade from one server on SQLite to several on PostgreSQL. Stop llmgw-server first, then:

  llmgw-server migrate --from-sqlite ~/.llmgw/server/llmgw.db --database-url postgres://llmgw:…@db:5432/llmgw

The SQLite file is opened read-only and checked as at start (a corrupt or foreign file is refused, exit 2).
Copied, in one transaction: nodes with their admin states (cordons, drains) and last reports, node
credentials, replicas with their ids (agents' engines are adopted, not relaunched), API keys, usage totals and per minute,
admin-listener tokens and events; and from the file's directory the admin token, the join token's secret,
engine-key-secret and the CA (tls/ca.pem, tls/ca-key.pem) into the database's secrets table, so every
instance uses them: join tokens, node credentials and engine keys stay valid.

The database must be an empty one (or one llmgw made with nothing in it): one that already holds nodes,
replicas, keys or any other copied row is refused, and nothing is written. Then start each instance with
--database-url; each takes the shared secrets into its own --data-dir and issues its own certificate from the CA.
Prints one summary line and exits 0; on any error, one line and exit 2.`;
