import { afterAll, expect, it } from '@jest/globals';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { PostgresStore } from '../store/postgres.js';
import { NodeCredentials } from './node-credentials.js';

/**
 * Issue 27, finding 5: the same new node id joining two instances at once got two
 * credentials (the guard was in memory, the write an upsert). The store now decides.
 */
const opened: PostgresStore[] = [];
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
});

describePostgres('joins of one node id racing on PostgreSQL', () => {
  it('issue exactly one credential per id in 100 rounds across two instances, 5 joins each', async () => {
    const db = await freshDatabase();
    const stores = [await PostgresStore.open(db.url), await PostgresStore.open(db.url)];
    opened.push(...stores);
    const instances = [new NodeCredentials(stores[0]!), new NodeCredentials(stores[1]!)];
    const twins: string[] = [];
    for (let round = 0; round < 100; round++) {
      const id = `node-${round}`;
      const joins = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => instances[i % 2]!.issue(id, new Date())));
      const issued = joins.filter((j) => j.status === 'fulfilled').length;
      if (issued !== 1) twins.push(`${id}: ${issued}`);
      for (const j of joins) if (j.status === 'rejected') expect((j.reason as Error).message).toMatch(/has already joined with its own credential/);
    }
    expect(twins).toEqual([]);
    expect((await stores[0]!.loadCredentials()).length).toBe(100);
    await db.drop();
  }, 60_000);
});
