import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, expect, it } from '@jest/globals';
import type pg from 'pg';
import { pino } from 'pino';
import { createClusterTables, testPool } from '../../test/cluster-tables.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { currentLeader, fenceHolds, LeaderLease, type LeaderLeaseOptions } from './lease.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = pino({ level: 'silent' });

/** Polls `cond` every 10 ms; returns the ms it took, or throws after `ms`. */
async function within(ms: number, cond: () => boolean | Promise<boolean>, what: string): Promise<number> {
  const t0 = performance.now();
  while (!(await cond())) {
    if (performance.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(10);
  }
  return performance.now() - t0;
}

/** A TCP proxy to PostgreSQL that can be cut (connections dropped, new ones refused) and restored on the same port. */
class CuttableProxy {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async listen(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async cut(): Promise<void> {
    const closed = new Promise((r) => this.server?.close(r));
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

describePostgres('LeaderLease on a real PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: pg.Pool;
  const leases: LeaderLease[] = [];
  const pools: pg.Pool[] = [];

  const lease = (instanceId: string, o: Partial<LeaderLeaseOptions> = {}) => {
    const l = new LeaderLease({ pool, log, instanceId, ttlMs: 1000, ...o });
    leases.push(l);
    return l;
  };

  beforeAll(async () => {
    db = await freshDatabase();
    await createClusterTables(db.url);
    pool = testPool(db.url);
  });
  afterEach(async () => {
    for (const l of leases.splice(0)) await l.stop();
    for (const p of pools.splice(0)) await p.end();
    await pool.query('DELETE FROM leader');
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('gives the lease to exactly one of two instances that start together', async () => {
    const a = lease('a');
    const b = lease('b');
    await Promise.all([a.start(), b.start()]);
    expect([a.isLeader(), b.isLeader()].filter(Boolean)).toHaveLength(1);
    const leader = a.isLeader() ? a : b;
    const follower = leader === a ? b : a;
    expect(leader.fence()).toEqual({ holder: leader.instanceId, epoch: 1 });
    expect(follower.fence()).toBeUndefined();
    // Renews keep the term; the follower keeps failing to take it.
    await sleep(1500);
    expect(leader.isLeader()).toBe(true);
    expect(follower.isLeader()).toBe(false);
    expect(leader.fence()?.epoch).toBe(1);
    expect(follower.info()).toMatchObject({ holder: leader.instanceId, epoch: 1 });
    expect(await currentLeader(pool)).toMatchObject({ holder: leader.instanceId, epoch: 1 });
    expect(await fenceHolds(pool, leader.fence()!)).toBe(true);
  });

  it('hands over at the next try when the leader stops (it releases), with a higher epoch', async () => {
    // a's term is long so that it still holds when b has started on a loaded machine.
    const a = lease('a', { ttlMs: 10_000 });
    await a.start();
    const old = a.fence()!;
    expect(old).toBeDefined();
    const b = lease('b');
    await b.start();
    expect(b.isLeader()).toBe(false);
    const changes: boolean[] = [];
    b.onChange((l) => changes.push(l));
    await a.stop();
    expect(a.isLeader()).toBe(false);
    // Its next try after the release takes it, long before a's 10 s term would have run out.
    await within(5_000, () => b.isLeader(), 'b takes over');
    expect(b.info()).toMatchObject({ holder: 'b', epoch: old.epoch + 1 });
    expect(changes).toEqual([true]);
    expect(await fenceHolds(pool, old)).toBe(false);
  });

  it('a renew in flight when it stops does not keep the lease: stop waits for it and releases what it took', async () => {
    let entered!: () => void;
    const inFlight = new Promise<void>((r) => (entered = r));
    let letGo!: () => void;
    const gate = new Promise<void>((r) => (letGo = r));
    let holding = false;
    let landed: Promise<unknown> = Promise.resolve();
    // The pool, but a renew sent while `holding` reaches the database only once let go.
    const slow = {
      query: async (text: string, values?: unknown[]) => {
        if (!holding || !text.includes('INSERT INTO leader')) return pool.query(text, values);
        holding = false;
        entered();
        await gate;
        landed = pool.query(text, values);
        return landed;
      },
    } as unknown as pg.Pool;
    const a = new LeaderLease({ pool: slow, log, instanceId: 'a', ttlMs: 1000 });
    leases.push(a);
    await a.start();
    expect(a.isLeader()).toBe(true);
    holding = true;
    await inFlight;
    const stopping = a.stop();
    letGo();
    await stopping;
    await landed;
    // Released, the late renew included: nobody holds it, and the next instance takes it at once.
    expect(await currentLeader(pool)).not.toHaveProperty('holder');
    const b = lease('b');
    await b.start();
    expect(b.isLeader()).toBe(true);
  });

  it('takes over from a leader that vanished without releasing within ttl + renew interval', async () => {
    const other = testPool(db.url);
    const a = new LeaderLease({ pool: other, log, instanceId: 'a', ttlMs: 1000 });
    leases.push(a);
    await a.start();
    const b = lease('b');
    await b.start();
    // What a SIGKILL leaves: the row, and no renews (lease-process.test.ts does it for real).
    await other.end();
    const t0 = performance.now();
    await within(1000 + b.renewEveryMs + 100, () => b.isLeader(), 'b takes over');
    expect(performance.now() - t0).toBeGreaterThan(1000 - 2 * b.renewEveryMs);
    expect(b.info()).toMatchObject({ holder: 'b', epoch: 2 });
  });

  it('is not leader once its local validity ran out, before any timer or reply has run', async () => {
    let jump = 0;
    const a = lease('a', { monotonicNow: () => performance.now() + jump });
    await a.start();
    expect(a.isLeader()).toBe(true);
    // Synchronously: the clock says ttl has passed since the last renew was sent.
    jump = a.ttlMs;
    expect(a.isLeader()).toBe(false);
    expect(a.fence()).toBeUndefined();
    // Only this clock jumped: the database's term is still running, so the next renew
    // extends it and a is leader again in the same epoch, having said so both ways.
    const changes: boolean[] = [];
    a.onChange((l) => changes.push(l));
    const epoch = a.info().epoch;
    await within(2 * a.renewEveryMs + 100, () => a.isLeader(), 'a leads again');
    expect(a.fence()!.epoch).toBe(epoch);
    expect(changes).toEqual([false, true]);
  });

  it('ends leadership within the ttl when the database goes away, and stays follower once it is back and another leads', async () => {
    const target = new URL(db.url);
    const proxy = new CuttableProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.listen();
    const viaProxy = new URL(db.url);
    viaProxy.port = String(proxy.port);
    const cutPool = testPool(viaProxy.toString(), { connectionTimeoutMillis: 300 });
    pools.push(cutPool);
    const lines: string[] = [];
    const a = new LeaderLease({
      pool: cutPool,
      instanceId: 'a',
      ttlMs: 1000,
      log: pino({ level: 'info' }, { write: (l: string) => void lines.push((JSON.parse(l) as { msg: string }).msg) }),
    });
    leases.push(a);
    await a.start();
    const b = lease('b');
    await b.start();
    expect(a.isLeader()).toBe(true);
    const changes: boolean[] = [];
    a.onChange((l) => changes.push(l));

    const t0 = performance.now();
    await proxy.cut();
    await within(a.ttlMs, () => !a.isLeader(), 'a stops leading');
    // onChange comes on time too (the expiry timer), not only isLeader().
    await within(100, () => changes.includes(false), 'a says it lost leadership');
    expect(performance.now() - t0).toBeLessThanOrEqual(a.ttlMs);
    expect(lines.some((l) => /^lost leadership: no renew for 900 ms, the database is unreachable/.test(l))).toBe(true);
    await within(a.ttlMs + 2 * b.renewEveryMs, () => b.isLeader(), 'b takes over');

    await proxy.listen();
    await within(3000, () => a.info().holder === 'b', 'a sees b lead');
    expect(a.isLeader()).toBe(false);
    expect(changes).toEqual([false]);
    expect(lines).toContain('leader lease: the database answers again');
    await proxy.cut();
  });

  it('says who leads, to any instance, and nobody once the lease is released', async () => {
    expect(await currentLeader(pool)).toEqual({ epoch: 0 });
    const a = lease('a');
    await a.start();
    expect(await currentLeader(pool)).toMatchObject({ holder: 'a', epoch: 1 });
    await a.stop();
    expect(await currentLeader(pool)).toEqual({ epoch: 1 });
  });
});
