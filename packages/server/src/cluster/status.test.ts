import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { pino } from 'pino';
import { createClusterTables, testPool } from '../../test/cluster-tables.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import type { InstanceRow } from './instances.js';
import { InstanceRegistry } from './instances.js';
import { LeaderLease } from './lease.js';
import { clusterStatus, readClusterStatus } from './status.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const row = (id: string, over: Partial<InstanceRow> = {}): InstanceRow => ({
  id,
  startedMs: T0,
  seenMs: T0 + 60_000,
  info: {},
  leader: false,
  self: false,
  ...over,
});

describe('clusterStatus', () => {
  const rows = [
    row('a', { adminUrl: 'https://a:8081', clientUrl: 'http://a:8080', info: { version: '1.2.0', catalog: { digest: 'abc123', models: 3 } } }),
    row('b', {
      startedMs: T0 + 1000,
      seenMs: T0 + 57_500,
      info: { catalog: { digest: 'abc123', models: 3, error: 'catalog.yaml: models[1].name is missing' } },
    }),
  ];

  it.each([
    {
      what: 'b leads, a answers: the leader line and the table agree, times are ISO in DB time, last seen in whole seconds',
      leader: { holder: 'b', epoch: 7, sinceMs: T0 + 30_000 },
      self: 'a',
      want: {
        leader: { instance: 'b', epoch: 7, since: '2026-03-01T12:00:30.000Z' },
        instances: [
          {
            id: 'a',
            admin_url: 'https://a:8081',
            client_url: 'http://a:8080',
            started: '2026-03-01T12:00:00.000Z',
            last_seen_s: 0,
            leader: false,
            self: true,
            version: '1.2.0',
            catalog: { digest: 'abc123', models: 3 },
          },
          {
            id: 'b',
            started: '2026-03-01T12:00:01.000Z',
            last_seen_s: 2,
            leader: true,
            self: false,
            catalog: { digest: 'abc123', models: 3, error: 'catalog.yaml: models[1].name is missing' },
          },
        ],
      },
    },
    {
      what: 'no holder: no leader instance, no since, nobody marked, the epoch kept',
      leader: { epoch: 7 },
      self: 'b',
      want: {
        leader: { epoch: 7 },
        instances: [expect.objectContaining({ id: 'a', leader: false, self: false }), expect.objectContaining({ id: 'b', leader: false, self: true })],
      },
    },
    {
      // A row's own flag is from an older read than the lease; the view follows the lease.
      what: "a row that says leader while the lease says another: the lease's holder is marked",
      leader: { holder: 'a', epoch: 8, sinceMs: T0 + 59_000 },
      self: 'b',
      rows: [row('a'), row('b', { leader: true })],
      want: {
        leader: { instance: 'a', epoch: 8, since: '2026-03-01T12:00:59.000Z' },
        instances: [expect.objectContaining({ id: 'a', leader: true }), expect.objectContaining({ id: 'b', leader: false })],
      },
    },
  ])('$what', ({ leader, self, rows: given, want }) => {
    expect(clusterStatus(given ?? rows, leader, self, T0 + 60_000)).toEqual({ store: 'postgres', instance: self, ...want });
  });

  it('a row refreshed after the clock was read is seen 0 s ago, not negative', () => {
    expect(clusterStatus([row('a', { seenMs: T0 + 61_000 })], { epoch: 0 }, 'a', T0 + 60_000).instances[0]?.last_seen_s).toBe(0);
  });
});

describePostgres('readClusterStatus on a real PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: pg.Pool;
  const log = pino({ level: 'silent' });

  beforeAll(async () => {
    db = await freshDatabase();
    await createClusterTables(db.url);
    pool = testPool(db.url);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('shows both instances, the lease holder as leader since its term began, and nobody once the lease is released', async () => {
    const a = new InstanceRegistry({ pool, log, id: 'a', adminUrl: 'https://a:8081', info: { version: '1.0.0', catalog: { digest: 'd1', models: 2 } } });
    const b = new InstanceRegistry({ pool, log, id: 'b', info: { version: '1.0.0' } });
    await a.start();
    await b.start();
    const lease = new LeaderLease({ pool, log, instanceId: 'b' });
    await lease.start();
    try {
      const before = Date.now();
      const v = await readClusterStatus(a, pool);
      expect(v).toMatchObject({ store: 'postgres', instance: 'a', leader: { instance: 'b', epoch: lease.info().epoch } });
      expect(v.instances.map((i) => [i.id, i.leader, i.self, i.last_seen_s])).toEqual([
        ['a', false, true, 0],
        ['b', true, false, 0],
      ]);
      expect(v.instances[0]).toMatchObject({ admin_url: 'https://a:8081', version: '1.0.0', catalog: { digest: 'd1', models: 2 } });
      // The same machine's clock and the database's agree to well within a minute.
      expect(Math.abs(Date.parse(v.leader.since ?? '') - before)).toBeLessThan(60_000);
      await lease.stop();
      const after = await readClusterStatus(b, pool);
      expect(after.leader.instance).toBeUndefined();
      expect(after.instances.some((i) => i.leader)).toBe(false);
    } finally {
      await lease.stop();
      await a.stop();
      await b.stop();
    }
  });
});
