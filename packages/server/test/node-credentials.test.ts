import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { caFingerprint, hashSecret, parseJoinToken } from '@llmgw/shared';
import type { EventList } from '@llmgw/shared';
import { makeServerSettings } from './live-server.js';
import { makeModel, makeReport } from './factories.js';
import { startServer } from '../src/server.js';
import { SqliteStore } from '../src/store/sqlite.js';
import { adminTls } from '../src/tls/index.js';
import { JoinToken, prepareJoinToken, readJoinToken } from '../src/credentials/join-token.js';
import { NodeCredentials } from '../src/credentials/node-credentials.js';
import { tempDirs } from './temp-dirs.js';

/**
 * The node credential over real HTTP: the join token only joins, a credential speaks
 * for its own node only, a joined id cannot be taken, and delete, approval and rotation
 * do what ctl says they do. A real server in-process on a real SQLite store.
 */
const model = makeModel({ name: 'm' });
const catalog = { models: [model], resolve: (n: string) => (n === 'm' ? model : undefined), suggest: () => [] };
const json = { 'content-type': 'application/json' };
const bearer = (t: string) => ({ authorization: `Bearer ${t}`, ...json });
const tmp = tempDirs('llmgw-creds-', afterAll);

async function serve(dir: string, extra: Parameters<typeof makeServerSettings>[1] = {}) {
  const s = await startServer(makeServerSettings(dir, { reconcileIntervalMs: 200, ...extra }), catalog, pino({ level: 'silent' }));
  const call = async (method: string, p: string, headers: Record<string, string>, body?: unknown) => {
    const r = await fetch(`${s.adminUrl}${p}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const join = (id: string, token = 'join') => call('POST', '/agent/v1/join', bearer(token), { node_id: id });
  const beat = (auth: string, report: Record<string, unknown>, shards: unknown[] = []) =>
    call('POST', '/agent/v1/heartbeat', bearer(auth), { report: makeReport({ mgmt_addr: '127.0.0.1', memory_total_mb: 8192, ...report }), shards });
  const admin = (method: string, p: string) => call(method, `/api/v1${p}`, bearer('admin'));
  /** The admin actions recorded so far, as [reason, message]: a refused one is none. */
  const adminEvents = async () =>
    ((await admin('GET', '/events')).body as unknown as EventList).events.filter((e) => e.source === 'admin').map((e) => [e.reason, e.message]);
  return { s, call, join, beat, admin, adminEvents };
}

describe('NodeCredentials', () => {
  it('issues one credential per node, keeps only its hash, and refuses a second', async () => {
    const store = new SqliteStore(tmp());
    const creds = await NodeCredentials.load(store);
    const secret = await creds.issue('a', new Date());
    expect(secret).toMatch(/^llmgw-node-[A-Za-z0-9_-]{43}$/);
    expect(await store.loadCredentials()).toEqual([{ nodeId: 'a', hash: hashSecret(secret), createdAt: expect.any(String) }]);
    expect(fs.readFileSync(store.file).includes(secret)).toBe(false);
    await expect(creds.issue('a', new Date())).rejects.toThrow(/node "a" has already joined .*ctl nodes delete a/);
    // A restart finds it again; the forgotten one is forgotten.
    const again = await NodeCredentials.load(store);
    expect([again.nodeOf(secret), again.nodeOf('join'), again.nodeOf(`${secret}x`)]).toEqual(['a', undefined, undefined]);
    again.forget('a');
    expect([again.nodeOf(secret), again.has('a')]).toEqual([undefined, false]);
    await store.close();
  });
});

describe('JoinToken', () => {
  it('rotates a generated token in its file (0600), after which the old one no longer matches', async () => {
    const file = path.join(tmp(), 'join-token');
    fs.writeFileSync(file, 'old\n');
    const t = new JoinToken('old', file);
    const next = await t.rotate();
    expect(next).toMatch(/^llmgw-join-/);
    expect(fs.readFileSync(file, 'utf8')).toBe(`${next}\n`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect([t.matches('old'), t.matches(next)]).toEqual([false, true]);
  });

  it('refuses to rotate a token set by LLMGW_JOIN_TOKEN, naming the variable', async () => {
    const t = new JoinToken('from-env');
    await expect(t.rotate()).rejects.toThrow(/LLMGW_JOIN_TOKEN.*restart the server/);
    expect(t.matches('from-env')).toBe(true);
  });

  it('on a shared store, stores a rotation for the other instances first, and adopts one of theirs', async () => {
    const file = path.join(tmp(), 'join-token');
    fs.writeFileSync(file, 'old\n');
    const stored: string[] = [];
    let refuse = false;
    const shared = {
      setSharedSecret: async (_name: string, value: string) => {
        if (refuse) throw new Error('connection refused');
        stored.push(value);
      },
    };
    const t = new JoinToken('old', file, (s) => s, shared);
    refuse = true;
    await expect(t.rotate()).rejects.toThrow(/cannot store the new join token in the database.*the old token still joins/);
    expect([t.matches('old'), fs.readFileSync(file, 'utf8')]).toEqual([true, 'old\n']);
    refuse = false;
    const next = await t.rotate();
    expect(stored).toEqual([next]);
    // Another instance rotated: this one takes its secret, file first.
    t.adopt('llmgw-join-from-b');
    expect([t.matches(next), t.matches('llmgw-join-from-b'), fs.readFileSync(file, 'utf8')]).toEqual([false, true, 'llmgw-join-from-b\n']);
  });
});

describe('the join token file', () => {
  it('holds the full token, 0600, also when LLMGW_JOIN_TOKEN gives the secret; the server checks the secret', async () => {
    const dataDir = tmp();
    const { caPem } = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [] }, pino({ level: 'silent' }));
    const { secret, file } = prepareJoinToken('from-env', dataDir, caPem);
    expect(secret).toBe('from-env');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(parseJoinToken(readJoinToken(dataDir))).toEqual({ secret: 'from-env', caHash: caFingerprint(caPem) });
    // Generated once, kept: a restart reads the secret back out of the full token.
    const gen = prepareJoinToken(undefined, tmp(), caPem);
    expect(prepareJoinToken(undefined, path.dirname(gen.file), caPem).secret).toBe(gen.secret);
    expect(() => readJoinToken(tmp())).toThrow(/start llmgw-server once/);
  });
});

describe('the agent API with node credentials', () => {
  let srv: Awaited<ReturnType<typeof serve>>;
  let a: string;
  let b: string;
  beforeAll(async () => {
    srv = await serve(tmp());
    a = String((await srv.join('node-a')).body.credential);
    b = String((await srv.join('node-b')).body.credential);
    expect((await srv.beat(a, { node_id: 'node-a' })).status).toBe(200);
  });
  afterAll(async () => {
    await srv.s.close();
  });

  it('lets the join token join and nothing else', async () => {
    const hb = await srv.beat('join', { node_id: 'node-a', mgmt_addr: '10.9.9.9' });
    expect(hb).toEqual({
      status: 401,
      body: { error: expect.stringMatching(/^the join token only joins: .*POST \/agent\/v1\/join/), code: 'unauthenticated' },
    });
    const poll = await srv.call('GET', '/agent/v1/nodes/node-a/assignments?wait_ms=0', bearer('join'));
    expect(poll.status).toBe(401);
    expect((await srv.join('node-c', 'wrong')).status).toBe(401);
    expect((await srv.beat('llmgw-node-made-up', { node_id: 'node-a' })).body.error).toMatch(/^unknown node credential/);
    const nodes = (await srv.admin('GET', '/nodes')).body as unknown as { id: string; mgmt_addr?: string }[];
    expect(nodes.find((n) => n.id === 'node-a')?.mgmt_addr).toBe('127.0.0.1');
  });

  it('lets a credential report and read its own node only', async () => {
    const asA = await srv.beat(b, { node_id: 'node-a', mgmt_addr: '10.9.9.9' });
    expect(asA).toEqual({
      status: 403,
      body: {
        error: 'this credential belongs to node node-b: it may report and read that node only, not "node-a"',
        code: 'forbidden',
        field: 'report.node_id',
      },
    });
    expect((await srv.call('GET', '/agent/v1/nodes/node-a/assignments?wait_ms=0', bearer(b))).status).toBe(403);
    const own = await srv.call('GET', '/agent/v1/nodes/node-b/assignments?wait_ms=0', bearer(b));
    expect(own).toEqual({ status: 200, body: expect.objectContaining({ node_id: 'node-b' }) });
  });

  it('refuses a second join as a joined node with a line naming the way out, and changes nothing', async () => {
    const before = await srv.admin('GET', '/nodes');
    const again = await srv.join('node-a');
    expect(again.status).toBe(409);
    expect(again.body.error).toBe(
      'node "node-a" has already joined with its own credential, so another machine cannot take its name; if this machine replaces it, free the name with: ctl nodes delete node-a (or start this agent with another --node-id)',
    );
    expect(again.body).not.toHaveProperty('credential');
    expect((await srv.beat(a, { node_id: 'node-a' })).status).toBe(200);
    expect(JSON.stringify((await srv.admin('GET', '/nodes')).body).replace(/"last_seen_s":\d+,?/g, '')).toBe(
      JSON.stringify(before.body).replace(/"last_seen_s":\d+,?/g, ''),
    );
  });

  it('deletes a node only with --force while it holds replicas, freeing its id and credential', async () => {
    const placed = async () =>
      ((await srv.admin('GET', '/replicas')).body as unknown as { shards: { node: string }[] }[]).flatMap((r) => r.shards.map((s) => s.node));
    for (let i = 0; i < 50 && (await placed()).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    const holder = (await placed())[0]!;
    const refused = await srv.admin('DELETE', `/nodes/${holder}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(
      new RegExp(`^node ${holder} holds 1 replica\\(s\\) \\(.+\\): drain it first \\(ctl drain ${holder}\\), or delete it with --force`),
    );
    expect(await srv.admin('DELETE', `/nodes/${holder}?force=true`)).toEqual({ status: 200, body: { id: holder, deleted: true, replicas_dropped: 1 } });
    expect((await srv.beat(holder === 'node-a' ? a : b, { node_id: holder })).body.error).toMatch(/^unknown node credential/);
    expect((await srv.join(holder)).status).toBe(200);
    expect((await srv.admin('DELETE', '/nodes/nobody')).status).toBe(404);
    expect(await srv.adminEvents()).toEqual([['node-delete', 'deleted (--force) by "admin token"']]);
  });
});

describe('membership', () => {
  it('keeps a node that joins under --join-approval manual pending, out of placement, until approved', async () => {
    const srv = await serve(tmp(), { joinApproval: 'manual' });
    try {
      const joined = await srv.join('big');
      expect(joined.body.state).toBe('pending-approval');
      const cred = String(joined.body.credential);
      expect((await srv.beat(cred, { node_id: 'big', memory_total_mb: 1 << 20 })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 500));
      expect((await srv.admin('GET', '/replicas')).body).toEqual([]);
      const node = ((await srv.admin('GET', '/nodes')).body as unknown as { id: string; state: string }[])[0];
      expect(node).toMatchObject({ id: 'big', state: 'pending-approval' });
      const uncordon = await srv.call('POST', '/api/v1/nodes/big/state', bearer('admin'), { state: 'uncordon' });
      expect(uncordon).toEqual({
        status: 409,
        body: { error: 'node big is waiting for approval: approve it with ctl nodes approve big, or remove it with ctl nodes delete big', code: 'conflict' },
      });
      expect(await srv.admin('POST', '/nodes/big/approve')).toEqual({ status: 200, body: { id: 'big', state: 'ready' } });
      expect((await srv.admin('POST', '/nodes/big/approve')).status).toBe(409);
      expect(await srv.adminEvents()).toEqual([['node-approve', 'approved by "admin token"']]);
      for (let i = 0; i < 50 && ((await srv.admin('GET', '/replicas')).body as unknown as unknown[]).length === 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect((await srv.admin('GET', '/replicas')).body).toEqual([expect.objectContaining({ shards: [expect.objectContaining({ node: 'big' })] })]);
    } finally {
      await srv.s.close();
    }
  });

  it('lets the first join claim a node stored before credentials existed, keeping its admin state', async () => {
    const dir = tmp();
    const seed = new SqliteStore(dir);
    await seed.saveNodeAdmin('legacy', { state: 'cordoned', reason: 'rack 4' });
    await seed.close();
    const srv = await serve(dir, { joinApproval: 'manual' });
    try {
      expect((await srv.join('legacy')).body.state).toBe('ready');
      expect((await srv.join('legacy')).status).toBe(409);
      expect(((await srv.admin('GET', '/nodes')).body as unknown as { state: string }[])[0]).toMatchObject({ state: 'cordoned', state_reason: 'rack 4' });
    } finally {
      await srv.s.close();
    }
  });

  it('rotates the join token over the admin API: joined nodes keep working, the old token stops joining', async () => {
    const dir = tmp();
    const file = path.join(dir, 'join-token');
    fs.writeFileSync(file, 'join\n');
    const srv = await serve(dir, { joinTokenFile: file });
    try {
      const cred = String((await srv.join('n1')).body.credential);
      const rotated = await srv.admin('POST', '/join-token/rotate');
      const token = String(rotated.body.token);
      expect([(await srv.join('n2')).status, (await srv.join('n2', token)).status]).toEqual([401, 200]);
      expect((await srv.beat(cred, { node_id: 'n1' })).status).toBe(200);
      expect(await srv.adminEvents()).toEqual([['join-token-rotate', 'rotated by "admin token": the old token no longer joins']]);
    } finally {
      await srv.s.close();
    }
  });
});
