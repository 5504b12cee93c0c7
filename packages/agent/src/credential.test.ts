import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { Agent } from './agent.js';
import { JoinRefused, NodeCredential, credentialFile, joinFile } from './credential.js';

/** A fake server: `/agent/v1/join` answers what `joinReply` says; other calls are recorded. */
async function fakeServer(joinReply: (n: number) => [number, unknown], other: (auth: string) => [number, unknown] = () => [200, { node_id: 'n1' }]) {
  const calls: { url: string; auth: string; body: string }[] = [];
  let joins = 0;
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += String(c)));
    req.on('end', () => {
      const auth = req.headers.authorization ?? '';
      calls.push({ url: req.url ?? '', auth, body });
      const [status, reply] = req.url === '/agent/v1/join' ? joinReply(++joins) : other(auth);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, calls };
}

const servers: http.Server[] = [];
const stops: (() => void)[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});
const stateDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-cred-'));
const silent = pino({ level: 'silent' });
const joined = (credential: string, state = 'ready'): [number, unknown] => [200, { node_id: 'n1', credential, state }];

describe('NodeCredential', () => {
  it('joins once with the join token, keeps the credential 0600, and sends only the credential afterwards', async () => {
    const s = await fakeServer(() => joined('llmgw-node-first-credential'));
    const dir = stateDir();
    const c = new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: dir, log: silent });
    expect(await Promise.all([c.header(), c.header()])).toEqual(['Bearer llmgw-node-first-credential', 'Bearer llmgw-node-first-credential']);
    expect(s.calls).toEqual([{ url: '/agent/v1/join', auth: 'Bearer jt', body: expect.stringMatching(/^\{"node_id":"n1","join_id":"[A-Za-z0-9_-]{32}"\}$/) }]);
    expect(fs.existsSync(joinFile(dir))).toBe(false);
    expect(fs.statSync(credentialFile(dir)).mode & 0o777).toBe(0o600);
    // A restarted agent finds it and does not join again; under another id it joins anew.
    expect(await new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: dir, log: silent }).header()).toBe(
      'Bearer llmgw-node-first-credential',
    );
    expect(s.calls).toHaveLength(1);
    await expect(new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'other', stateDir: dir, log: silent }).header()).rejects.toThrow(
      /not one: node_id n1/,
    );
    expect(s.calls).toHaveLength(2);
  });

  it('says in one line why a join was refused and throws, so the agent exits instead of retrying', async () => {
    const taken =
      'node "n1" has already joined with its own credential, so another machine cannot take its name; if this machine replaces it, free the name with: ctl nodes delete n1';
    const s = await fakeServer(() => [409, { error: taken }]);
    const lines: string[] = [];
    const dir = stateDir();
    const c = new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: dir, log: silent, onRefused: (l) => lines.push(l) });
    await expect(c.header()).rejects.toBeInstanceOf(JoinRefused);
    expect(lines).toEqual([`the server at ${s.url} refused to let this machine join as node n1 (409): ${taken}`]);
    expect(fs.existsSync(credentialFile(dir))).toBe(false);

    const bad = await fakeServer(() => [401, { error: 'invalid join token' }]);
    const c2 = new NodeCredential({ server: bad.url, joinToken: 'old', nodeId: 'n1', stateDir: dir, log: silent, onRefused: (l) => lines.push(l) });
    await expect(c2.header()).rejects.toThrow(
      `the server at ${bad.url} rejected the join token (invalid join token): set LLMGW_JOIN_TOKEN to the server's current join token`,
    );
  });

  it('sends one join id for one join: saved before it is sent, the same on a retry and after a restart, a new one for the next join', async () => {
    const s = await fakeServer((n) => (n <= 2 ? [502, { error: 'the reply was lost' }] : joined('llmgw-node-retried')));
    const dir = stateDir();
    const make = () => new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: dir, log: silent });
    await expect(make().header()).rejects.toThrow(/502/);
    expect(fs.statSync(joinFile(dir)).mode & 0o777).toBe(0o600);
    // A restarted agent retries the same join.
    const c = make();
    await expect(c.header()).rejects.toThrow(/502/);
    expect(await c.header()).toBe('Bearer llmgw-node-retried');
    const ids = s.calls.map((x) => (JSON.parse(x.body) as { join_id: string }).join_id);
    expect(new Set(ids).size).toBe(1);
    expect(fs.existsSync(joinFile(dir))).toBe(false);
    // The credential gone (ctl nodes delete): the next join is another one.
    c.rejected('Bearer llmgw-node-retried');
    await c.header();
    expect((JSON.parse(s.calls[3]!.body) as { join_id: string }).join_id).not.toBe(ids[0]);
  });

  it('treats an unreachable or failing server as worth retrying, not as a refusal', async () => {
    const s = await fakeServer((n) => (n === 1 ? [503, { error: 'store unavailable' }] : joined('llmgw-node-after-outage')));
    const lines: string[] = [];
    const c = new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: stateDir(), log: silent, onRefused: (l) => lines.push(l) });
    await expect(c.header()).rejects.toThrow(/503/);
    expect(await c.header()).toBe('Bearer llmgw-node-after-outage');
    await expect(
      new NodeCredential({
        server: 'http://127.0.0.1:9',
        joinToken: 'jt',
        nodeId: 'n1',
        stateDir: stateDir(),
        log: silent,
        onRefused: (l) => lines.push(l),
      }).header(),
    ).rejects.toThrow(/ECONNREFUSED/);
    expect(lines).toEqual([]);
  });

  it("retries a join refused for the server's join rate (429), which is no refusal of this node", async () => {
    const s = await fakeServer((n) => (n === 1 ? [429, { error: 'too many joins with this join token', code: 'rate_limited' }] : joined('llmgw-node-later')));
    const lines: string[] = [];
    const c = new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: stateDir(), log: silent, onRefused: (l) => lines.push(l) });
    await expect(c.header()).rejects.toThrow(/429/);
    expect(await c.header()).toBe('Bearer llmgw-node-later');
    expect(lines).toEqual([]);
  });
});

describe('Agent with a node credential', () => {
  it('heartbeats with the credential, and joins again when the server no longer knows it (a deleted node)', async () => {
    const s = await fakeServer(
      (n) => joined(`llmgw-node-credential-${n}`),
      (auth) =>
        auth === 'Bearer llmgw-node-credential-1' ? [401, { error: 'unknown node credential' }] : [200, { node_id: 'n1', version: 1, assignments: [] }],
    );
    const dir = stateDir();
    const auth = new NodeCredential({ server: s.url, joinToken: 'jt', nodeId: 'n1', stateDir: dir, log: silent });
    const agent = new Agent(
      { server: s.url, joinToken: 'jt', auth, nodeId: 'n1', labels: {}, advertiseAddr: '127.0.0.1', heartbeatIntervalMs: 100, probeIntervalMs: 10_000 },
      () => Promise.resolve({ cpuCores: 1, gpus: [], fabrics: [], warnings: [] }),
      { converge: () => {}, statuses: () => [], onChange: () => {} },
      silent,
    );
    stops.push(() => agent.stop());
    void agent.start();
    const deadline = Date.now() + 5000;
    while (!s.calls.some((c) => c.url === '/agent/v1/heartbeat' && c.auth === 'Bearer llmgw-node-credential-2') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const used = [...new Set(s.calls.filter((c) => c.url !== '/agent/v1/join').map((c) => c.auth))];
    expect(used).toEqual(['Bearer llmgw-node-credential-1', 'Bearer llmgw-node-credential-2']);
    expect(s.calls.filter((c) => c.url === '/agent/v1/join')).toHaveLength(2);
    expect(s.calls.some((c) => c.auth === 'Bearer jt' && c.url !== '/agent/v1/join')).toBe(false);
    expect(JSON.parse(fs.readFileSync(credentialFile(dir), 'utf8'))).toEqual({ node_id: 'n1', credential: 'llmgw-node-credential-2' });
  });
});
