import { hostname } from 'node:os';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { pino } from 'pino';
import { createClusterTables, testPool } from '../../test/cluster-tables.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { DB_MS } from './db-time.js';
import { InstanceRegistry, newInstanceId } from './instances.js';
import { LeaderLease } from './lease.js';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('makes an instance id of host, pid and four random hex digits, different each time', () => {
  const id = newInstanceId();
  expect(id).toMatch(new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-${process.pid}-[0-9a-f]{4}$`));
  expect(new Set(Array.from({ length: 20 }, newInstanceId)).size).toBeGreaterThan(1);
});

describePostgres('InstanceRegistry on a real PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: pg.Pool;

  beforeAll(async () => {
    db = await freshDatabase();
    await createClusterTables(db.url);
    pool = testPool(db.url);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('lists two instances with the leader marked, publishes catalog results with a NOTIFY, and forgets one that stopped', async () => {
    const a = new InstanceRegistry({
      pool,
      log,
      id: 'a',
      adminUrl: 'https://a:8081',
      clientUrl: 'http://a:8080',
      info: { version: '1.0.0', store: 'postgres' },
      refreshEveryMs: 100,
    });
    const b = new InstanceRegistry({ pool, log, id: 'b', adminUrl: 'https://b:8081', info: { version: '1.0.0', store: 'postgres' }, refreshEveryMs: 100 });
    await a.start();
    await b.start();
    const lease = new LeaderLease({ pool, log, instanceId: 'b' });
    await lease.start();

    const listen = new pg.Client({ connectionString: db.url });
    await listen.connect();
    const notes: string[] = [];
    listen.on('notification', (n) => notes.push(`${n.channel}:${n.payload}`));
    await listen.query('LISTEN llmgw');
    try {
      const seen = await a.list();
      expect(seen.map((i) => [i.id, i.leader, i.self])).toEqual([
        ['a', false, true],
        ['b', true, false],
      ]);
      expect(seen[0]).toMatchObject({ adminUrl: 'https://a:8081', clientUrl: 'http://a:8080', info: { version: '1.0.0', store: 'postgres' } });
      expect(seen[1]!.clientUrl).toBeUndefined();

      // seen_ms moves with the refresh; started_ms does not.
      const before = seen[1]!;
      await sleep(250);
      const after = (await a.list()).find((i) => i.id === 'b')!;
      expect(after.seenMs).toBeGreaterThan(before.seenMs);
      expect(after.startedMs).toBe(before.startedMs);

      await b.setInfo({ catalog: { digest: 'sha256:abc', models: 3, error: 'models[2]: no profile' } });
      expect((await a.list()).find((i) => i.id === 'b')!.info).toEqual({
        version: '1.0.0',
        store: 'postgres',
        catalog: { digest: 'sha256:abc', models: 3, error: 'models[2]: no profile' },
      });
      await sleep(100);
      expect(notes).toContain('llmgw:instances');

      notes.length = 0;
      await b.stop();
      await lease.stop();
      expect((await a.list()).map((i) => i.id)).toEqual(['a']);
      await sleep(300); // b's refresh timer is gone: it does not come back
      expect((await a.list()).map((i) => i.id)).toEqual(['a']);
      expect(notes).toContain('llmgw:instances');
    } finally {
      await listen.end();
      await Promise.all([a.stop(), b.stop(), lease.stop()]);
      await pool.query('DELETE FROM instances');
    }
  });

  it('shows a new start time for an instance restarted under the same id (its predecessor was killed, its row left)', async () => {
    const first = new InstanceRegistry({ pool, log, id: 'fixed', info: { version: '1.0.0', store: 'postgres' }, refreshEveryMs: 100 });
    const again = new InstanceRegistry({ pool, log, id: 'fixed', info: { version: '1.0.0', store: 'postgres' }, refreshEveryMs: 100 });
    await first.start();
    try {
      const before = (await first.list()).find((i) => i.id === 'fixed')!;
      // As after a SIGKILL: no stop(), the row stays, and the restart registers under the same id.
      await sleep(50);
      await again.start();
      const after = (await again.list()).filter((i) => i.id === 'fixed');
      expect(after).toHaveLength(1);
      expect(after[0]!.startedMs).toBeGreaterThan(before.startedMs);
      await sleep(250); // its refreshes keep the new start
      expect((await again.list()).find((i) => i.id === 'fixed')!.startedMs).toBe(after[0]!.startedMs);
    } finally {
      await Promise.all([first.stop(), again.stop()]);
      await pool.query('DELETE FROM instances');
    }
  });

  it('does not list an instance that stopped refreshing (crashed) once 10 s of DB time have passed', async () => {
    const a = new InstanceRegistry({ pool, log, id: 'alive' });
    await a.start();
    await pool.query(`INSERT INTO instances (id, started_ms, seen_ms, info) VALUES ('crashed', ${DB_MS} - 60000, ${DB_MS} - 10001, '{}')`);
    await pool.query(`INSERT INTO instances (id, started_ms, seen_ms, info) VALUES ('recent', ${DB_MS} - 60000, ${DB_MS} - 9000, '{}')`);
    expect((await a.list()).map((i) => i.id)).toEqual(['recent', 'alive']);
    await a.stop();
    await pool.query('DELETE FROM instances');
  });

  it('removes rows a day old when an instance starts, and puts its own row back if someone removed it', async () => {
    await pool.query(`INSERT INTO instances (id, started_ms, seen_ms, info) VALUES ('ancient', 0, 0, '{}')`);
    const a = new InstanceRegistry({ pool, log, id: 'a', refreshEveryMs: 50 });
    await a.start();
    expect((await pool.query('SELECT id FROM instances ORDER BY id')).rows).toEqual([{ id: 'a' }]);
    await pool.query('DELETE FROM instances');
    await sleep(200);
    expect((await a.list()).map((i) => i.id)).toEqual(['a']);
    await a.stop();
  });
});
