import type pg from 'pg';
import { StoreOpenError } from './open.js';

/**
 * The database's clock in epoch milliseconds, as every time the database writes itself
 * ("DB ms"): liveness, leases and change cursors are judged on one clock for all
 * instances, not on each instance's own. `clock_timestamp()`, not `now()`: a
 * transaction's start time would let a long transaction write a time in the past.
 */
export const DB_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/**
 * The PostgreSQL schema as the list of steps that build it: step N takes a database at
 * schema version N to N+1. Steps are only ever appended, never edited, so that every
 * existing database reaches the same schema as a new one. Each applied step is a row of
 * `schema_version`.
 */
const MIGRATIONS = [
  // Issue 16: everything SQLite holds (schema.ts, at its version 7), with jsonb where SQLite
  // keeps JSON text; and the tables several instances share (leader lease, instances,
  // rate-limit counts, shared secrets).
  `CREATE TABLE nodes (
     id text PRIMARY KEY,
     admin jsonb NOT NULL,
     report jsonb,
     shards jsonb,
     last_seen_ms bigint,
     updated_ms bigint NOT NULL
   );
   CREATE INDEX nodes_updated ON nodes (updated_ms);
   CREATE TABLE replicas (
     id text PRIMARY KEY,
     data jsonb NOT NULL,
     updated_ms bigint NOT NULL
   );
   CREATE TABLE node_credentials (
     node_id text PRIMARY KEY,
     hash text NOT NULL UNIQUE,
     created_at text NOT NULL
   );
   CREATE TABLE api_keys (
     id text PRIMARY KEY,
     name text NOT NULL,
     hash text NOT NULL UNIQUE,
     prefix text NOT NULL,
     models jsonb NOT NULL,
     rpm integer,
     max_concurrent integer,
     expires_at text,
     created_at text NOT NULL,
     revoked_at text
   );
   CREATE TABLE usage (
     key_id text NOT NULL,
     model text NOT NULL,
     requests bigint NOT NULL DEFAULT 0,
     errors bigint NOT NULL DEFAULT 0,
     cancelled bigint NOT NULL DEFAULT 0,
     prompt_tokens bigint NOT NULL DEFAULT 0,
     completion_tokens bigint NOT NULL DEFAULT 0,
     PRIMARY KEY (key_id, model)
   );
   CREATE TABLE admin_tokens (
     id text PRIMARY KEY,
     name text NOT NULL,
     role text NOT NULL,
     hash text NOT NULL UNIQUE,
     prefix text NOT NULL,
     created_at text NOT NULL,
     revoked_at text
   );
   CREATE TABLE events (
     id bigserial PRIMARY KEY,
     time_ms bigint NOT NULL,
     data jsonb NOT NULL
   );
   CREATE INDEX events_time ON events (time_ms);
   CREATE TABLE secrets (
     name text PRIMARY KEY,
     value text NOT NULL
   );
   CREATE TABLE leader (
     id int PRIMARY KEY CHECK (id = 1),
     holder text,
     epoch bigint NOT NULL,
     expires_ms bigint NOT NULL,
     since_ms bigint NOT NULL
   );
   INSERT INTO leader (id, holder, epoch, expires_ms, since_ms) VALUES (1, NULL, 0, 0, 0);
   CREATE TABLE instances (
     id text PRIMARY KEY,
     admin_url text,
     client_url text,
     started_ms bigint NOT NULL,
     seen_ms bigint NOT NULL,
     info jsonb NOT NULL
   );
   CREATE TABLE limit_counts (
     instance text,
     key_id text,
     window_ms bigint NOT NULL,
     requests int NOT NULL,
     in_flight int NOT NULL,
     seen_ms bigint NOT NULL,
     PRIMARY KEY (instance, key_id)
   );`,
  // Issue 24: each model's rollout record (schema.ts has the same step).
  `CREATE TABLE rollouts (
     model text PRIMARY KEY,
     history jsonb,
     control jsonb
   );`,
  // Issue 26: a key's priority band when requests wait in the gateway (schema.ts has the same step).
  `ALTER TABLE api_keys ADD COLUMN priority text;`,
  // Issue 26: a key's tokens-per-minute quota and usage per minute (schema.ts has the same
  // step), and the tokens each instance counted for a key in the last minute, shared like
  // `requests` (cluster/limits.ts).
  `ALTER TABLE api_keys ADD COLUMN tpm bigint;
   CREATE TABLE usage_minutes (
     key_id text NOT NULL,
     model text NOT NULL,
     minute_ms bigint NOT NULL,
     requests bigint NOT NULL DEFAULT 0,
     errors bigint NOT NULL DEFAULT 0,
     cancelled bigint NOT NULL DEFAULT 0,
     prompt_tokens bigint NOT NULL DEFAULT 0,
     completion_tokens bigint NOT NULL DEFAULT 0,
     PRIMARY KEY (key_id, model, minute_ms)
   );
   CREATE INDEX usage_minutes_time ON usage_minutes (minute_ms);
   ALTER TABLE limit_counts ADD COLUMN tokens bigint NOT NULL DEFAULT 0;`,
  // Issue 28: the seq of the heartbeat a node row holds, so an older one never replaces it.
  `ALTER TABLE nodes ADD COLUMN seq bigint;`,
  // Issue 28: the hash of the join id that issued a node's credential, so a retried join is the same join (schema.ts has the same step).
  `ALTER TABLE node_credentials ADD COLUMN join_hash text;`,
];

/** The newest schema version this server knows (the number of steps). */
export const PG_SCHEMA_VERSION = MIGRATIONS.length;

/**
 * The advisory lock that migrations run under: instances starting at once queue on it,
 * and each one after the first finds the schema already current. A constant ('llmg' in
 * ASCII) so every version of llmgw-server takes the same lock.
 */
const MIGRATE_LOCK = 0x6c6c6d67;

/** The tables a database at `version` has: how a damaged llmgw database is told. */
function tablesAt(version: number): string[] {
  return MIGRATIONS.slice(0, version).flatMap((step) => [...step.matchAll(/CREATE TABLE (\w+)/g)].map((m) => m[1]!));
}

/**
 * Checks that the database is an llmgw one (or empty) that this server can run, and
 * brings it to the newest schema, all in one transaction under `MIGRATE_LOCK`: of two
 * instances that start at once one migrates, the other waits and then finds nothing to
 * do. Refuses, with a `StoreOpenError` that names `where`, a database that holds other
 * tables but no `schema_version`, one from a newer server, or one missing its tables.
 * Returns the version it found.
 */
export async function migratePostgres(client: pg.ClientBase, where: string): Promise<number> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
    const tables = (
      await client.query<{ name: string }>('SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename')
    ).rows.map((r) => r.name);
    let version = 0;
    if (tables.includes('schema_version')) {
      version = Number((await client.query<{ v: string | null }>('SELECT max(version)::text AS v FROM schema_version')).rows[0]?.v ?? 0);
    } else if (tables.length) {
      const found = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, … (${tables.length} tables)` : '');
      throw new StoreOpenError(
        `database ${where} is not an llmgw database (it holds tables but no schema_version: ${found}): use an empty database for llmgw, or the one llmgw created`,
      );
    }
    if (version > PG_SCHEMA_VERSION) {
      throw new StoreOpenError(
        `database ${where} has schema version ${version}, newer than this llmgw-server knows (${PG_SCHEMA_VERSION}): run the newer llmgw-server, or restore a backup`,
      );
    }
    const missing = tables.includes('schema_version') ? tablesAt(version).filter((t) => !tables.includes(t)) : [];
    if (missing.length) {
      throw new StoreOpenError(
        `database ${where} is an llmgw database at schema version ${version} but lacks tables (${missing.join(', ')}): restore it from a backup`,
      );
    }
    if (version === 0) await client.query('CREATE TABLE IF NOT EXISTS schema_version (version int PRIMARY KEY, applied_ms bigint NOT NULL)');
    for (let v = version; v < MIGRATIONS.length; v++) {
      await client.query(MIGRATIONS[v]!);
      await client.query(`INSERT INTO schema_version (version, applied_ms) VALUES ($1, ${DB_MS})`, [v + 1]);
    }
    await client.query('COMMIT');
    return version;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
