import { afterAll, afterEach, beforeAll, expect, it } from '@jest/globals';
import type pg from 'pg';
import { pino } from 'pino';
import { createClusterTables, testPool } from '../../test/cluster-tables.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { DB_MS } from './db-time.js';
import { SharedLimits, type LocalCount } from './limits.js';
import { KeyRing } from '../gateway/keys.js';
import type { StoredKey } from '../store/store.js';
import { memoryStore } from '../store/testing.js';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A gateway's rpm check as KeyRing does it (a sliding log of admission times, refused
 * at `rpm`), plus what the other instances counted.
 */
class Gateway {
  readonly times: number[] = [];
  admitted = 0;
  shared?: SharedLimits;
  constructor(readonly rpm: number) {}
  count(now = Date.now()): number {
    while (this.times.length && this.times[0]! <= now - 60_000) this.times.shift();
    return this.times.length;
  }
  admit(key: string): boolean {
    const now = Date.now();
    if (this.count(now) + (this.shared?.othersRequests(key) ?? 0) >= this.rpm) return false;
    this.times.push(now);
    this.admitted++;
    return true;
  }
  source = (): Array<[string, LocalCount]> => [['k', { requests: this.count(), inFlight: 0 }]];
}

describePostgres('SharedLimits on a real PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: pg.Pool;
  const running: SharedLimits[] = [];
  const make = (instanceId: string, o: Partial<ConstructorParameters<typeof SharedLimits>[0]> = {}) => {
    const s = new SharedLimits({ pool, log, instanceId, ...o });
    running.push(s);
    return s;
  };

  beforeAll(async () => {
    db = await freshDatabase();
    await createClusterTables(db.url);
    pool = testPool(db.url);
  });
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop();
    await pool.query('DELETE FROM limit_counts');
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('two instances counting 30 requests of one key each see 60 in all after a sync', async () => {
    const a = make('a');
    const b = make('b');
    a.setLocal('k', { requests: 30, inFlight: 2 });
    b.setLocal('k', { requests: 30, inFlight: 5 });
    b.setLocal('only-b', { requests: 1, inFlight: 0 });
    expect(a.othersRequests('k')).toBe(0);
    await a.sync();
    await b.sync();
    await a.sync();
    expect(30 + a.othersRequests('k')).toBe(60);
    expect(30 + b.othersRequests('k')).toBe(60);
    expect(a.othersInFlight('k')).toBe(5);
    expect(b.othersInFlight('k')).toBe(2);
    expect(a.othersRequests('only-b')).toBe(1);
    expect(b.othersRequests('only-b')).toBe(0); // its own count is not among the others'

    // A key counted down to nothing has its row removed; a stopped instance's rows go at once.
    b.setLocal('only-b', { requests: 0, inFlight: 0 });
    await b.sync();
    await a.sync();
    expect(a.othersRequests('only-b')).toBe(0);
    await b.stop();
    await a.sync();
    expect(a.othersRequests('k')).toBe(0);
    expect((await pool.query('SELECT instance, key_id FROM limit_counts')).rows).toEqual([{ instance: 'a', key_id: 'k' }]);
  });

  it('shares the tokens each instance counted for a key in the last minute, as it shares requests', async () => {
    const a = make('a');
    const b = make('b');
    a.setLocal('k', { requests: 0, inFlight: 0, tokens: 12_000 });
    b.setLocal('k', { requests: 0, inFlight: 0, tokens: 20_500 });
    await a.sync();
    await b.sync();
    await a.sync();
    expect([a.othersTokens('k'), b.othersTokens('k')]).toEqual([20_500, 12_000]);
    // Tokens alone keep a key's row: a key with a quota and no rpm is still shared.
    expect((await pool.query('SELECT instance, tokens::int FROM limit_counts ORDER BY instance')).rows).toEqual([
      { instance: 'a', tokens: 12_000 },
      { instance: 'b', tokens: 20_500 },
    ]);
    b.setLocal('k', { requests: 0, inFlight: 0, tokens: 0 });
    await b.sync();
    await a.sync();
    expect(a.othersTokens('k')).toBe(0);
  });

  it('stops counting another instance whose rows are older than 3 s of DB time (it died)', async () => {
    await pool.query(`INSERT INTO limit_counts VALUES ('dead', 'k', 0, 50, 3, ${DB_MS} - 3001), ('slow', 'k', 0, 7, 1, ${DB_MS} - 2500)`);
    const a = make('a');
    await a.sync();
    expect(a.othersRequests('k')).toBe(7);
    expect(a.othersInFlight('k')).toBe(1);
  });

  it('syncs on its own every 250 ms, from a source callback', async () => {
    let n = 0;
    const a = make('a', { source: () => [['k', { requests: n, inFlight: 0 }]] });
    const b = make('b');
    await a.start();
    await b.start();
    n = 12;
    await sleep(700);
    expect(b.othersRequests('k')).toBe(12);
  });

  it('keeps the others’ last sums while the database is away, for holdMs, then limits alone', async () => {
    const other = testPool(db.url);
    const a = new SharedLimits({ pool: other, log, instanceId: 'a', holdMs: 400 });
    const b = make('b');
    b.setLocal('k', { requests: 9, inFlight: 0 });
    await b.sync();
    await a.sync();
    expect(a.othersRequests('k')).toBe(9);
    await other.end();
    await a.sync(); // fails: the pool is gone
    expect(a.othersRequests('k')).toBe(9);
    await sleep(450);
    expect(a.othersRequests('k')).toBe(0);
  });

  it('two gateways share a key’s tpm: the tokens served through one refuse the other’s next request after a sync', async () => {
    const key: StoredKey = { id: 'key-t', name: 't', hash: 'h', prefix: 'p', models: [], tpm: 1000, createdAt: '2026-01-01T00:00:00.000Z' };
    const shared: SharedLimits[] = [];
    const rings = ['a', 'b'].map((id) => {
      // The ring reads the others' counts from `s`, and `s` publishes the ring's.
      const of: { ring?: KeyRing } = {};
      const s = make(id, { source: () => of.ring!.localCounts() });
      shared.push(s);
      of.ring = new KeyRing(memoryStore(), Date.now, { keys: [key], usage: [] }, s);
      return of.ring;
    });
    const [a, b] = rings as [KeyRing, KeyRing];
    a.recordUsage(key.id, 'm', { promptTokens: 400, completionTokens: 300 });
    b.recordUsage(key.id, 'm', { promptTokens: 200 });
    expect(b.admit(key).ok).toBe(true); // b alone has seen 200 of 1000
    await shared[0]!.sync();
    await shared[1]!.sync();
    await shared[0]!.sync();
    expect([shared[0]!.othersTokens(key.id), shared[1]!.othersTokens(key.id)]).toEqual([200, 700]);
    b.recordUsage(key.id, 'm', { completionTokens: 100 });
    // 300 here + 700 at a = 1000, the quota: refused on both.
    expect(b.admit(key)).toMatchObject({ ok: false, reason: 'tpm' });
    await shared[1]!.sync();
    await shared[0]!.sync();
    expect(a.admit(key)).toMatchObject({ ok: false, reason: 'tpm' });
    for (const r of rings) await r.close();
  });

  it('holds an rpm limit across two instances under 2× the offered load to within rpm + λ·D/2 (figure in the output)', async () => {
    const rpm = 100;
    const ga = new Gateway(rpm);
    const gb = new Gateway(rpm);
    ga.shared = make('a', { source: ga.source });
    gb.shared = make('b', { source: gb.source });
    await ga.shared.start();
    await gb.shared.start();
    // 100 requests/s at each instance for 2 s: λ = 200/s offered in all, 4× the limit over the test.
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      ga.admit('k');
      gb.admit('k');
      await sleep(10);
    }
    const total = ga.admitted + gb.admitted;
    const d = (2 * 250) / 1000;
    const bound = rpm + (200 * d) / 2;
    console.log(
      `shared rpm ${rpm}, two instances at 100 req/s each for 2 s: ${total} admitted in all (${ga.admitted} + ${gb.admitted}); bound rpm + λ·D·(k−1)/k = ${bound}; alone each would admit ${rpm}, ${2 * rpm} in all`,
    );
    expect(total).toBeGreaterThanOrEqual(rpm);
    expect(total).toBeLessThanOrEqual(bound);
  });
});
