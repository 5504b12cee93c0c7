import pg from 'pg';
import { PostgresStore } from '../src/store/postgres.js';

/** Creates llmgw's tables (the cluster's among them) in the database at `url`: the store's own migration, as an instance runs it. */
export async function createClusterTables(url: string): Promise<void> {
  const store = await PostgresStore.open(url);
  await store.close();
}

/** A pool for a test: small, and with the 'error' listener every pool needs (a dropped idle connection otherwise crashes the process). */
export function testPool(url: string, extra: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 1000, ...extra });
  pool.on('error', () => {});
  return pool;
}
