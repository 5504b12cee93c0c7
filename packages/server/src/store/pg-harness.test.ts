import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { describePostgres, freshDatabase } from '../../test/postgres.js';

describePostgres('the test run has a throwaway PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  beforeAll(async () => {
    db = await freshDatabase();
  });
  afterAll(async () => db.drop());

  it('gives each test file its own empty database on the run cluster', async () => {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    const { rows } = await c.query<{ db: string; tables: string }>(
      "SELECT current_database() AS db, (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')::text AS tables",
    );
    await c.end();
    expect(rows[0]?.db).toMatch(/^t_[0-9a-f]{12}$/);
    expect(rows[0]?.tables).toBe('0');
  });
});
