// jest globalSetup: one throwaway PostgreSQL cluster per test run, its URL handed to the
// test workers through LLMGW_TEST_POSTGRES_URL (they inherit this process's environment).
// Outside CI a machine without PostgreSQL runs the rest of the suite and says so; in CI
// (CI set) the tests that need it fail instead, so CI cannot pass by not running them.
import { startPostgres } from './cluster.mjs';

export default async function globalSetup() {
  if (process.env.LLMGW_TEST_POSTGRES_URL) return;
  try {
    const pg = await startPostgres({ settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } });
    globalThis.__llmgwPostgres = pg;
    process.env.LLMGW_TEST_POSTGRES_URL = pg.url;
  } catch (err) {
    process.env.LLMGW_TEST_POSTGRES_MISSING = err.message;
    console.log(`\nPostgreSQL tests SKIPPED: ${err.message}`);
  }
}
