import pg from 'pg';

/**
 * The cluster's three tables, as the issue-16 contract gives them. Until the PostgreSQL
 * store's migrations (store/pg-schema.ts) are on main, the cluster tests create them
 * with this; then this becomes a call of that migration.
 */
export const CLUSTER_DDL = `
CREATE TABLE IF NOT EXISTS leader (id int PRIMARY KEY CHECK (id = 1), holder text, epoch bigint NOT NULL, expires_ms bigint NOT NULL, since_ms bigint NOT NULL);
CREATE TABLE IF NOT EXISTS instances (id text PRIMARY KEY, admin_url text, client_url text, started_ms bigint NOT NULL, seen_ms bigint NOT NULL, info jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS limit_counts (instance text, key_id text, window_ms bigint NOT NULL, requests int NOT NULL, in_flight int NOT NULL, seen_ms bigint NOT NULL, PRIMARY KEY (instance, key_id));
`;

/** Creates the cluster tables in the database at `url`. */
export async function createClusterTables(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(CLUSTER_DDL);
  } finally {
    await c.end();
  }
}

/** A pool for a test: small, and with the 'error' listener every pool needs (a dropped idle connection otherwise crashes the process). */
export function testPool(url: string, extra: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 1000, ...extra });
  pool.on('error', () => {});
  return pool;
}
