import { randomBytes } from 'node:crypto';
import { describe } from '@jest/globals';
import pg from 'pg';

/**
 * The throwaway cluster of this test run (scripts/test-postgres/global-setup.mjs), or
 * why there is none. Outside CI a missing PostgreSQL skips these tests with a line in
 * the output; in CI they run and fail, so CI cannot pass without them.
 */
const URL = process.env.LLMGW_TEST_POSTGRES_URL;
const MISSING = process.env.LLMGW_TEST_POSTGRES_MISSING;

export const havePostgres = URL !== undefined || Boolean(process.env.CI);

/** `describe` for tests that need PostgreSQL: skipped, with the reason, only outside CI. */
export const describePostgres: typeof describe = havePostgres ? describe : (describe.skip as typeof describe);

/** A new, empty database in the run's cluster; `drop` removes it (after the pool using it is closed). */
export async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  if (!URL) throw new Error(`no PostgreSQL for this test run: ${MISSING ?? 'LLMGW_TEST_POSTGRES_URL is not set'} (run ./scripts/bootstrap.sh)`);
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = URL.replace(/\/postgres$/, `/${name}`);
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
