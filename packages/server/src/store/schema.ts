import type Database from 'better-sqlite3';

/**
 * Marks a step SQLite cannot run inside a transaction (a change of `auto_vacuum` takes
 * effect only through a `VACUUM`, and `VACUUM` refuses to run in one).
 */
const OUTSIDE_TRANSACTION = '-- outside a transaction\n';

/**
 * The SQLite schema as the list of steps that build it: step N takes a database at
 * `user_version` N to N+1. Steps are only ever appended, never edited, so that every
 * existing database reaches the same schema as a new one.
 */
const MIGRATIONS = [
  `CREATE TABLE nodes (
     id TEXT PRIMARY KEY,
     admin_state TEXT NOT NULL DEFAULT 'ready',
     admin_reason TEXT,
     admin_changed_at TEXT,
     report TEXT,
     last_seen_ms INTEGER
   );
   CREATE TABLE replicas (
     id TEXT PRIMARY KEY,
     model TEXT NOT NULL,
     data TEXT NOT NULL
   );`,
  `CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     hash TEXT NOT NULL UNIQUE,
     prefix TEXT NOT NULL,
     models TEXT NOT NULL,
     rpm INTEGER,
     max_concurrent INTEGER,
     expires_at TEXT,
     created_at TEXT NOT NULL,
     revoked_at TEXT
   );
   CREATE TABLE usage (
     key_id TEXT NOT NULL,
     model TEXT NOT NULL,
     requests INTEGER NOT NULL DEFAULT 0,
     errors INTEGER NOT NULL DEFAULT 0,
     prompt_tokens INTEGER NOT NULL DEFAULT 0,
     completion_tokens INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (key_id, model)
   );`,
  `ALTER TABLE nodes ADD COLUMN admin_drain TEXT;`,
  `ALTER TABLE usage ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;`,
  // Issue 12: each node's own credential, only as its SHA-256. A node without a row here
  // (every node of a database from before this step) is claimed by the first join.
  `CREATE TABLE node_credentials (
     node_id TEXT PRIMARY KEY,
     hash TEXT NOT NULL UNIQUE,
     created_at TEXT NOT NULL
   );`,
  // Issue 12: engine keys are derived from <data-dir>/engine-key-secret and no longer stored;
  // tokens with roles (admin, viewer, metrics) for the admin listener, hashed like client keys.
  `UPDATE replicas SET data = json_remove(data, '$.apiKey');
   CREATE TABLE admin_tokens (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     role TEXT NOT NULL,
     hash TEXT NOT NULL UNIQUE,
     prefix TEXT NOT NULL,
     created_at TEXT NOT NULL,
     revoked_at TEXT
   );`,
  // Issue 14: the fleet's events (ctl events), each as its JSON view; kept for a bounded
  // time and count, pruned on write (see Store.addEvents).
  `CREATE TABLE events (
     id INTEGER PRIMARY KEY,
     time_ms INTEGER NOT NULL,
     data TEXT NOT NULL
   );
   CREATE INDEX events_time ON events (time_ms);`,
  // Issue 24: each model's rollout record, as two JSON documents written apart: the
  // planning server's revisions and halt, and the operator's pause and resume.
  `CREATE TABLE rollouts (
     model TEXT PRIMARY KEY,
     history TEXT,
     control TEXT
   );`,
  // Issue 26: a key's priority band when requests wait in the gateway; NULL = standard.
  `ALTER TABLE api_keys ADD COLUMN priority TEXT;`,
  // Issue 26: a key's tokens-per-minute quota (NULL = none), and usage per minute so that
  // `ctl usage --since` answers for a window (`usage` keeps the totals since creation).
  `ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
   CREATE TABLE usage_minutes (
     key_id TEXT NOT NULL,
     model TEXT NOT NULL,
     minute_ms INTEGER NOT NULL,
     requests INTEGER NOT NULL DEFAULT 0,
     errors INTEGER NOT NULL DEFAULT 0,
     cancelled INTEGER NOT NULL DEFAULT 0,
     prompt_tokens INTEGER NOT NULL DEFAULT 0,
     completion_tokens INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (key_id, model, minute_ms)
   );
   CREATE INDEX usage_minutes_time ON usage_minutes (minute_ms);`,
  // Issue 27: space freed by deleted nodes (and events pruned) goes back to the file system
  // (`PRAGMA incremental_vacuum`, after each node deletion) rather than staying in the file
  // for ever. The VACUUM rewrites the file once, so an existing store gives back what it held.
  `${OUTSIDE_TRANSACTION}PRAGMA auto_vacuum = INCREMENTAL;
   VACUUM;`,
  // Issue 28: the hash of the join id that issued a node's credential, so a retried join is the same join.
  `ALTER TABLE node_credentials ADD COLUMN join_hash TEXT;`,
];

/** The newest schema version this server knows (`user_version` after every step). */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** The version from which `admin_tokens` exists: the number of the step that creates it. */
const ADMIN_TOKENS_SINCE = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE admin_tokens')) + 1;
/** The version from which `rollouts` exists. */
const ROLLOUTS_SINCE = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE rollouts')) + 1;
/** The version from which `usage_minutes` exists. */
const USAGE_MINUTES_SINCE = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE usage_minutes')) + 1;
/** The version from which `events` exists. */
const EVENTS_SINCE = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE events')) + 1;

/** The tables a database at `version` has: how an llmgw store is told from another SQLite file. */
export function tablesAt(version: number): string[] {
  return [
    ...(version >= 1 ? ['nodes', 'replicas'] : []),
    ...(version >= 2 ? ['api_keys', 'usage'] : []),
    // The step that creates node_credentials is the fifth (index 4 in MIGRATIONS).
    ...(version >= 5 ? ['node_credentials'] : []),
    // The step that creates admin_tokens (and drops stored engine keys) is the sixth.
    ...(version >= ADMIN_TOKENS_SINCE ? ['admin_tokens'] : []),
    ...(version >= EVENTS_SINCE ? ['events'] : []),
    ...(version >= ROLLOUTS_SINCE ? ['rollouts'] : []),
    ...(version >= USAGE_MINUTES_SINCE ? ['usage_minutes'] : []),
  ];
}

/** Brings a database up to the newest schema, each step in its own transaction (but those that cannot be in one). */
export function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  for (let v = version; v < MIGRATIONS.length; v++) {
    if (MIGRATIONS[v]!.startsWith(OUTSIDE_TRANSACTION)) {
      // Harmless to run again if the process stops before the version is written.
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
      continue;
    }
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}
