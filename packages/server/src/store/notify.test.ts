import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import pino from 'pino';
import { Writable } from 'node:stream';
import { makeReplica, makeReport } from '../../test/factories.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { Notifications } from './notify.js';
import { PostgresStore, type Topic } from './postgres.js';

const TOPICS: Topic[] = ['replicas', 'keys', 'tokens', 'credentials', 'nodes', 'events', 'instances', 'leader'];

/** A log whose lines the test reads. */
function capturedLog(): { log: pino.Logger; lines: { msg: string }[] } {
  const lines: { msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as { msg: string });
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

/** Resolves once `cond` holds, checked every 5 ms; fails after 3 s. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 3000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describePostgres('Notifications', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: PostgresStore;
  let n: Notifications;
  const got: string[] = [];
  const captured = capturedLog();

  beforeAll(async () => {
    db = await freshDatabase();
    store = await PostgresStore.open(db.url);
    n = await Notifications.listen(db.url, { log: captured.log, backoffMs: 20, pingMs: 500 });
    for (const t of TOPICS) n.on(t, () => void got.push(t));
  });
  afterAll(async () => {
    await n.close();
    await store.close();
    await db.drop();
  });

  /** The topics that arrive while `write` runs (a final NOTIFY marks the end, since delivery is in commit order). */
  async function topicsOf(write: () => Promise<unknown>): Promise<string[]> {
    got.length = 0;
    await write();
    await store.pool.query("SELECT pg_notify('llmgw', 'leader')");
    await until(() => got.includes('leader'), 'the end marker');
    return got.filter((t) => t !== 'leader');
  }

  it('each write another instance must see is notified with its topic; heartbeats and usage are not', async () => {
    expect(await topicsOf(() => store.saveKey({ id: 'k', name: 'k', hash: 'h', prefix: 'p', models: [], createdAt: 'x' }))).toEqual(['keys']);
    expect(await topicsOf(() => store.writeReplicas([makeReplica()], []))).toEqual(['replicas']);
    expect(await topicsOf(() => store.writeReplicas([], ['r-1']))).toEqual(['replicas']);
    expect(await topicsOf(() => store.saveNodeAdmin('n1', { state: 'cordoned' }))).toEqual(['nodes']);
    expect(await topicsOf(() => store.saveToken({ id: 't', name: 't', role: 'viewer', hash: 'h', prefix: 'p', createdAt: 'x' }))).toEqual(['tokens']);
    expect(await topicsOf(() => store.addCredential({ nodeId: 'n1', hash: 'h', createdAt: 'x' }))).toEqual(['credentials']);
    expect((await topicsOf(() => store.deleteNode('n1'))).sort()).toEqual(['credentials', 'nodes']);
    expect(
      await topicsOf(() =>
        store.addEvents(
          [{ id: 0, time: new Date().toISOString(), type: 'Normal', source: 'admin', reason: 'cordon', object: 'node/n1', nodes: ['n1'], message: 'm' }],
          { sinceMs: 0, maxRows: 10 },
        ),
      ),
    ).toEqual(['events']);
    expect(await topicsOf(() => store.saveNodeReports([{ id: 'n2', report: makeReport({ node_id: 'n2' }), lastSeenMs: 0 }]))).toEqual([]);
    expect(
      await topicsOf(() => store.addUsage([{ keyId: 'k', model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: 0, completionTokens: 0 }])),
    ).toEqual([]);
  });

  it('a write that is rolled back notifies nothing', async () => {
    await store.pool.query("UPDATE leader SET holder = 'other', epoch = 9, expires_ms = 0 WHERE id = 1");
    expect(await topicsOf(() => store.writeReplicas([makeReplica({ id: 'r-9' })], [], { holder: 'me', epoch: 1 }).catch(() => {}))).toEqual([]);
  });

  it('after its connection is killed it reconnects, calls every callback once to reload all, logs the outage once, and keeps delivering', async () => {
    got.length = 0;
    captured.lines.length = 0;
    const { rows } = await store.pool.query<{ ok: boolean }>(
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'llmgw-server listen'",
    );
    expect(rows).toEqual([{ ok: true }]);
    await until(() => got.length >= TOPICS.length, 'the reload after the reconnect');
    expect([...got].sort()).toEqual([...TOPICS].sort());
    expect(n.connected).toBe(true);
    expect(await topicsOf(() => store.saveKey({ id: 'k2', name: 'k2', hash: 'h2', prefix: 'p', models: [], createdAt: 'x' }))).toEqual(['keys']);
    expect(captured.lines.map((l) => l.msg)).toEqual([
      'lost the LISTEN connection to PostgreSQL: changes made by other instances are not seen until it is back; reconnecting',
      'LISTEN connection to PostgreSQL back: reloading everything',
    ]);
  });

  it('a connection refused while reconnecting is retried with backoff, logged once for the whole outage', async () => {
    got.length = 0;
    captured.lines.length = 0;
    // New connections to this database are refused until it is allowed again (said from another database).
    const admin = new pg.Client({ connectionString: process.env.LLMGW_TEST_POSTGRES_URL });
    await admin.connect();
    const name = db.url.split('/').pop()!;
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'llmgw-server listen'");
    await until(() => !n.connected, 'the drop');
    await new Promise((r) => setTimeout(r, 300));
    expect(got).toEqual([]);
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    await admin.end();
    await until(() => got.length >= TOPICS.length, 'the reload after the reconnect');
    expect(captured.lines.map((l) => l.msg)).toEqual([
      'lost the LISTEN connection to PostgreSQL: changes made by other instances are not seen until it is back; reconnecting',
      'LISTEN connection to PostgreSQL back: reloading everything',
    ]);
  });
});
