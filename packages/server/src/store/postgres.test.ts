import { afterEach, expect, it } from '@jest/globals';
import net from 'node:net';
import pg from 'pg';
import { makeReplica, makeReport } from '../../test/factories.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { DomainError } from '../errors.js';
import { StoreOpenError } from './open.js';
import { PG_SCHEMA_VERSION } from './pg-schema.js';
import { PostgresStore } from './postgres.js';

/** Databases and stores made by a test, dropped and closed after it. */
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function database(): Promise<string> {
  const db = await freshDatabase();
  cleanup.push(() => db.drop());
  return db.url;
}

async function store(url?: string): Promise<PostgresStore> {
  const s = await PostgresStore.open(url ?? (await database()));
  cleanup.push(() => s.close());
  return s;
}

async function sql(url: string, text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

async function openError(url: string): Promise<StoreOpenError> {
  const err: unknown = await PostgresStore.open(url).then(
    (s) => s.close().then(() => undefined),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StoreOpenError);
  expect((err as Error).message).not.toContain('\n');
  return err as StoreOpenError;
}

/** Makes `holder` the leader at `epoch`, its lease ending `ttlMs` from the database's now (negative: already over). */
async function lease(s: PostgresStore, holder: string, epoch: number, ttlMs: number): Promise<void> {
  await s.pool.query('UPDATE leader SET holder = $1, epoch = $2, expires_ms = $3, since_ms = $4 WHERE id = 1', [holder, epoch, (await s.dbNowMs()) + ttlMs, 0]);
}

describePostgres('PostgresStore', () => {
  it('two instances opening one new database at once migrate it once', async () => {
    const url = await database();
    const [a, b] = await Promise.all([PostgresStore.open(url), PostgresStore.open(url)]);
    cleanup.push(
      () => a.close(),
      () => b.close(),
    );
    const { rows } = await a.pool.query<{ version: number }>('SELECT version FROM schema_version ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
    await a.saveKey({ id: 'k', name: 'k', hash: 'h', prefix: 'p', models: [], createdAt: 'x' });
    expect((await b.loadKeys()).map((k) => k.id)).toEqual(['k']);
  });

  it('refuses a database that holds other tables, and leaves it as it was', async () => {
    const url = await database();
    await sql(url, 'CREATE TABLE invoices (id int); CREATE TABLE customers (id int)');
    const err = await openError(url);
    expect(err.message).toMatch(
      /^database llmgw@127\.0\.0\.1:\d+\/t_\w+ is not an llmgw database \(it holds tables but no schema_version: customers, invoices\): use an empty database/,
    );
    const { rows } = await sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename");
    expect(rows.map((r: { tablename: string }) => r.tablename)).toEqual(['customers', 'invoices']);
  });

  it('reads a wrong-shaped node row as safe: no report or shards, and an unreadable admin state as cordoned', async () => {
    const url = await database();
    const store = await PostgresStore.open(url);
    cleanup.push(() => store.close());
    await store.saveNodeReports([
      {
        id: 'n1',
        report: { node_id: 'n1', hostname: 'n1', mgmt_addr: '10.0.0.1', agent_version: 't', labels: {}, gpus: [], fabrics: [] },
        lastSeenMs: 0,
        shards: [],
      },
    ]);
    await store.pool.query(`UPDATE nodes SET admin = 'null', report = '{"gpus": 7}', shards = '[{"state": 1}]'`);
    const [n] = await store.loadNodes();
    expect(n).toEqual({ id: 'n1', admin: { state: 'cordoned', reason: expect.stringMatching(/unreadable/) }, lastSeenMs: expect.any(Number) });
    // As another instance pulls it (the writer's own pull leaves its own batches out).
    const other = await PostgresStore.open(url);
    cleanup.push(() => other.close());
    expect((await other.loadNodesChanged(0)).nodes).toEqual([n]);
  });

  it('refuses a database from a newer server', async () => {
    const url = await database();
    await (await PostgresStore.open(url)).close();
    await sql(url, 'INSERT INTO schema_version (version, applied_ms) VALUES ($1, 0)', [PG_SCHEMA_VERSION + 1]);
    expect((await openError(url)).message).toContain(`has schema version ${PG_SCHEMA_VERSION + 1}, newer than this llmgw-server knows (${PG_SCHEMA_VERSION})`);
  });

  it('refuses an unreachable server with where and what to check, never the password', async () => {
    const closed = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    const err = await openError(`postgres://llmgw:hunter2secret@127.0.0.1:${closed}/llmgw`);
    expect(err.message).toMatch(
      new RegExp(`^cannot reach PostgreSQL at llmgw@127\\.0\\.0\\.1:${closed}/llmgw \\(.*ECONNREFUSED.*\\): check that the server runs`),
    );
    expect(err.message).not.toContain('hunter2secret');
    const missing = await openError(`${(await database()).replace(/\/t_\w+$/, '/no_such_db')}`);
    expect(missing.message).toMatch(/^PostgreSQL at llmgw@127\.0\.0\.1:\d+\/no_such_db has no such database/);
    expect((await openError('mysql://x@y/z')).message).toContain('not postgres');
  });

  it('a fenced write lands under the current lease, and is refused, changing nothing, under an old epoch, another holder or an expired lease', async () => {
    const s = await store();
    await lease(s, 'a', 3, 10_000);
    await s.writeReplicas([makeReplica({ id: 'r-1' })], [], { holder: 'a', epoch: 3 });
    const before = await s.loadReplicas();
    expect(before.map((r) => r.id)).toEqual(['r-1']);
    const refused = async (fence: { holder: string; epoch: number }) => {
      const err: unknown = await s.writeReplicas([makeReplica({ id: 'r-2' })], ['r-1'], fence).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({
        code: 'not_leader',
        message: `this instance is no longer the leader (lease epoch ${fence.epoch} was taken over or expired); its plan was not written`,
      });
      expect(await s.loadReplicas()).toEqual(before);
    };
    await lease(s, 'b', 4, 10_000);
    await refused({ holder: 'a', epoch: 3 });
    await refused({ holder: 'a', epoch: 4 });
    await lease(s, 'a', 3, -1);
    await refused({ holder: 'a', epoch: 3 });
  });

  it('a takeover waits for a fenced write in flight: the plan lands whole, before the new epoch', async () => {
    const s = await store();
    await lease(s, 'a', 1, 10_000);
    const blocker = await s.pool.connect();
    const other = await s.pool.connect();
    cleanup.push(() => {
      blocker.release();
      other.release();
      return Promise.resolve();
    });
    const waiting = async (like: string) => {
      for (;;) {
        const { rows } = await s.pool.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", [like]);
        if (rows.length) return;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    // The old leader's write passes the fence, then waits on a lock the test holds on replicas.
    await blocker.query('BEGIN; LOCK TABLE replicas IN EXCLUSIVE MODE');
    const write = s.writeReplicas([makeReplica({ id: 'r-1' })], [], { holder: 'a', epoch: 1 });
    await waiting('INSERT INTO replicas%');
    // A takeover now queues behind the write's hold on the lease row.
    const takeover = other.query("UPDATE leader SET holder = 'b', epoch = epoch + 1 WHERE id = 1 RETURNING epoch");
    await waiting('UPDATE leader SET holder%');
    await blocker.query('COMMIT');
    await write;
    expect((await takeover).rows).toEqual([{ epoch: '2' }]);
    await expect(s.writeReplicas([], ['r-1'], { holder: 'a', epoch: 1 })).rejects.toMatchObject({ code: 'not_leader' });
    expect((await s.loadReplicas()).map((r) => r.id)).toEqual(['r-1']);
  });

  it('loadNodesChanged returns the rows written after a cursor, with shards and the database clock', async () => {
    const url = await database();
    const [s, other] = [await store(url), await store(url)];
    const cursor = await s.dbNowMs();
    expect(await s.loadNodesChanged(cursor + 1_000_000)).toEqual({ nodes: [], dbNowMs: expect.any(Number) });
    await new Promise((r) => setTimeout(r, 5));
    const shards = [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready' as const, port: 8000 }];
    const wrote = await other.saveNodeReports([{ id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1, shards }]);
    const first = await s.loadNodesChanged(cursor);
    expect(first.nodes).toEqual([{ id: 'n1', admin: { state: 'ready' }, report: makeReport({ node_id: 'n1' }), shards, lastSeenMs: expect.any(Number) }]);
    const seen = first.nodes[0]!.lastSeenMs!;
    expect(seen).toBeGreaterThan(cursor);
    // The write answers with the database's clock it stamped the row with: the writer knows its own row.
    expect(wrote).toBe(seen);
    expect(first.dbNowMs).toBeGreaterThanOrEqual(seen);
    // Nothing since: empty, with the clock still given. An admin change is a change too.
    await new Promise((r) => setTimeout(r, 5));
    expect((await s.loadNodesChanged(first.dbNowMs)).nodes).toEqual([]);
    await s.saveNodeAdmin('n1', { state: 'cordoned' });
    expect((await s.loadNodesChanged(first.dbNowMs)).nodes.map((n) => [n.id, n.admin.state, n.lastSeenMs])).toEqual([['n1', 'cordoned', seen]]);
  });

  it("loadNodesChanged leaves out the rows of the instance's own batches, not what others wrote over them (issue 32)", async () => {
    const url = await database();
    const [a, b] = [await store(url), await store(url)];
    const row = (id: string) => ({ id, report: makeReport({ node_id: id }), lastSeenMs: 1 });
    await a.saveNodeReports([row('n1'), row('n2')]);
    await b.saveNodeReports([row('n3')]);
    const ids = async (s: PostgresStore) => (await s.loadNodesChanged(0)).nodes.map((n) => n.id);
    expect([await ids(a), await ids(b)]).toEqual([['n3'], ['n1', 'n2']]);
    // Another instance's heartbeat or admin change over a's row: a pulls it.
    await b.saveNodeReports([row('n2')]);
    await b.saveNodeAdmin('n1', { state: 'cordoned' });
    expect(await ids(a)).toEqual(['n1', 'n2', 'n3']);
    // The full load still has every row.
    expect((await a.loadNodes()).map((n) => n.id)).toEqual(['n1', 'n2', 'n3']);
  });

  it('loadNodeHeads reads every row but its report and shards; loadNodesById the whole rows asked for', async () => {
    const s = await store();
    expect(await s.loadNodeHeads()).toEqual({ heads: [], dbNowMs: expect.any(Number) });
    const shards = [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready' as const, port: 8000 }];
    const wrote = await s.saveNodeReports([
      { id: 'n2', report: makeReport({ node_id: 'n2' }), lastSeenMs: 1, shards, seq: 7 },
      { id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1 },
    ]);
    await s.saveNodeAdmin('n3', { state: 'cordoned' });
    const { heads, dbNowMs } = await s.loadNodeHeads();
    expect(heads).toEqual([
      { id: 'n1', admin: { state: 'ready' }, lastSeenMs: wrote },
      { id: 'n2', admin: { state: 'ready' }, lastSeenMs: wrote, seq: 7 },
      { id: 'n3', admin: { state: 'cordoned' } },
    ]);
    expect(dbNowMs).toBeGreaterThanOrEqual(wrote as number);
    expect(await s.loadNodesById([])).toEqual([]);
    expect(await s.loadNodesById(['n2', 'gone'])).toEqual([
      { id: 'n2', admin: { state: 'ready' }, report: makeReport({ node_id: 'n2' }), shards, lastSeenMs: wrote, seq: 7 },
    ]);
  });

  it('a node row never takes a heartbeat older (seq) than the one it holds, whichever instance writes last (issue 28)', async () => {
    const s = await store();
    const at = (state: 'ready' | 'starting') => [{ id: 'r-1-0', replica_id: 'r-1', state, port: 8000 }];
    await s.saveNodeReports([{ id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1, shards: at('ready'), seq: 12 }]);
    // Another instance's batch with seq 11 commits after it: the row keeps seq 12.
    await s.saveNodeReports([{ id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1, shards: at('starting'), seq: 11 }]);
    expect((await s.loadNodes()).map((n) => [n.seq, n.shards?.[0]?.state])).toEqual([[12, 'ready']]);
    await s.saveNodeReports([{ id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1, shards: at('starting'), seq: 13 }]);
    expect((await s.loadNodes()).map((n) => [n.seq, n.shards?.[0]?.state])).toEqual([[13, 'starting']]);
  });

  it('saveNodeReports writes 5,000 nodes in one call, well above 5,000 rows a second', async () => {
    const s = await store();
    const rows = Array.from({ length: 5000 }, (_, i) => {
      const id = `node-${String(i).padStart(5, '0')}`;
      return {
        id,
        report: makeReport({ node_id: id, labels: { rack: `r${i % 40}` } }),
        lastSeenMs: 0,
        shards: [{ id: `r-${i}-0`, replica_id: `r-${i}`, state: 'ready' as const }],
      };
    });
    await s.saveNodeReports(rows);
    const t0 = performance.now();
    await s.saveNodeReports(rows);
    const ms = performance.now() - t0;
    const { rows: counted } = await s.pool.query<{ n: string }>("SELECT count(*) AS n FROM nodes WHERE shards->0->>'state' = 'ready'");
    expect(counted[0]?.n).toBe('5000');
    // 5,000 rows in well under a second (a 2-core CI box does it in ~150 ms).
    expect(ms).toBeLessThan(1000);
  });

  it('a shared secret is the first instance’s value, for every instance', async () => {
    const url = await database();
    const [a, b] = [await store(url), await store(url)];
    const [x, y] = await Promise.all([a.sharedSecret('join-token', () => 'from-a'), b.sharedSecret('join-token', () => 'from-b')]);
    expect(x).toBe(y);
    expect(await b.sharedSecret('join-token', () => 'later')).toBe(x);
  });

  it('skips an event row that is not an event', async () => {
    const s = await store();
    const [e] = await s.addEvents(
      [{ id: 0, time: new Date().toISOString(), type: 'Normal', source: 'admin', reason: 'cordon', object: 'node/n1', nodes: ['n1'], message: 'ok' }],
      { sinceMs: 0, maxRows: 10 },
    );
    await s.pool.query(`INSERT INTO events (time_ms, data) VALUES (0, '[1]'), (0, '{"message": 1}')`);
    expect(await s.loadEvents(10)).toEqual([e]);
  });
});
