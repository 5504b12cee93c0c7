import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { pino, type Logger } from 'pino';
import { fullJoinToken, type ShardAssignment } from '@llmgw/shared';
import { Agent } from './agent.js';
import { NodeCredential } from './credential.js';
import { ModelCache } from './files/cache.js';
import { ModelFiles } from './files/store.js';
import type { MachineProbe } from './probe/index.js';
import { ServerPool } from './servers.js';
import { ClusterState, TEST_CA, startInstance, type Instance } from './test-control-plane.js';
import { shardAssignment, waitFor } from './testing.js';
import { checkServerList, establishTrust, serverClient } from './trust.js';

const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/main.js');

const probe = (): Promise<MachineProbe> => Promise.resolve({ memoryTotalMb: 8192, cpuCores: 2, gpus: [], fabrics: [], warnings: [] });

function capture() {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      cb();
    },
  });
  const log: Logger = pino({ level: 'info' }, stream);
  return { log, lines };
}

const assignment = (id: string): ShardAssignment => shardAssignment(id);

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-failover-'));
  cleanups.push(() => fs.rmSync(d, { recursive: true, force: true }));
  return d;
};

async function cluster(n: number): Promise<{ state: ClusterState; instances: Instance[] }> {
  const state = new ClusterState();
  const instances: Instance[] = [];
  for (let i = 0; i < n; i++) {
    const inst = await startInstance(state);
    instances.push(inst);
    cleanups.push(() => inst.kill().catch(() => undefined));
  }
  return { state, instances };
}

/** The agent as main builds it: the pin checked, one pool for the join, heartbeats, polls and files. */
async function startAgent(urls: string[], log: Logger, converged: string[][]) {
  const trust = await establishTrust({ server: urls, joinToken: fullJoinToken('join-secret', TEST_CA), insecureHttp: false }, log);
  const pool = new ServerPool(urls, log);
  const auth = new NodeCredential({ server: pool, joinToken: trust.secret, ...(trust.ca ? { ca: trust.ca } : {}), nodeId: 'n1', stateDir: tmp(), log });
  const agent = new Agent(
    {
      server: pool,
      joinToken: trust.secret,
      ...(trust.ca ? { ca: trust.ca } : {}),
      auth,
      nodeId: 'n1',
      labels: {},
      advertiseAddr: '127.0.0.1',
      heartbeatIntervalMs: 100,
      probeIntervalMs: 60_000,
    },
    probe,
    { converge: (a) => converged.push(a.map((s) => s.id)), statuses: () => [], onChange: () => {} },
    log,
  );
  cleanups.push(() => agent.stop());
  await agent.start();
  return { agent, pool, trust };
}

const count = (inst: Instance, kind: string, since = 0) => inst.hits.filter((h) => h.kind === kind && h.at >= since).length;

describe('an agent given several server addresses', () => {
  it('keeps heartbeating and long-polling on the second instance when the first is killed, without a restart', async () => {
    const { state, instances } = await cluster(2);
    const [a, b] = instances as [Instance, Instance];
    state.publish([assignment('r1-0')]);
    const { log, lines } = capture();
    const converged: string[][] = [];
    await startAgent([a.url, b.url], log, converged);
    expect(converged).toEqual([['r1-0']]);
    // Everything goes to the first address while it works.
    await waitFor('a long-poll held on the first instance', () => a.held() === 1);
    await waitFor('heartbeats on the first instance', () => count(a, 'heartbeat') >= 3);
    expect(b.hits).toEqual([]);

    const killedAt = Date.now();
    await a.kill();
    // The long-poll cut by the kill reconnects to the second at once, not after a pause.
    await waitFor('the long-poll on the second instance', () => b.held() === 1);
    const pollMovedMs = Date.now() - killedAt;
    expect(pollMovedMs).toBeLessThan(1000);
    await waitFor('heartbeats on the second instance', () => count(b, 'heartbeat') >= 5);
    // A change made while the first is gone arrives through the second's long-poll.
    state.publish([assignment('r1-0'), assignment('r2-0')]);
    await waitFor('the new assignments', () => converged.length === 2);
    expect(converged[1]).toEqual(['r1-0', 'r2-0']);
    // The node credential from the join on the first instance works on the second: no join there.
    expect(count(b, 'join')).toBe(0);

    // Sticky: the first instance is back, but the agent stays where it works.
    await a.restart();
    const backAt = Date.now();
    await waitFor('more heartbeats on the second instance', () => count(b, 'heartbeat', backAt) >= 5);
    expect(count(a, 'heartbeat', backAt) + count(a, 'poll', backAt)).toBe(0);

    // One info line says where it went; nothing is reported as an error.
    const moves = lines.filter((l) => l.msg.startsWith('server '));
    expect(moves).toEqual([
      expect.objectContaining({
        level: 30,
        msg: expect.stringMatching(new RegExp(`^server ${a.url} unreachable \\((ECONNRESET|ECONNREFUSED)\\); using ${b.url}$`)) as unknown,
      }),
    ]);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('moves a long-poll held by a frozen instance as soon as a heartbeat finds it gone, not at the poll timeout', async () => {
    const { state, instances } = await cluster(2);
    const [a, b] = instances as [Instance, Instance];
    const { log, lines } = capture();
    const converged: string[][] = [];
    await startAgent([a.url, b.url], log, converged);
    await waitFor('a long-poll held on the first instance', () => a.held() === 1);
    // SIGSTOP: no reset, no refusal; the heartbeat's 10 s timeout is the first sign.
    a.freeze();
    await waitFor('a heartbeat on the second instance', () => count(b, 'heartbeat') > 0, 15_000);
    const movedAt = Date.now();
    await waitFor('the long-poll on the second instance', () => b.held() === 1, 5000);
    expect(Date.now() - movedAt).toBeLessThan(1000);
    state.publish([assignment('r3-0')]);
    await waitFor('the new assignments', () => converged.at(-1)?.[0] === 'r3-0');
    expect(lines.filter((l) => l.msg.startsWith('server '))).toEqual([
      expect.objectContaining({ level: 30, msg: `server ${a.url} unreachable (ETIMEDOUT); using ${b.url}` }),
    ]);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('joins through the second address when the first refuses connections from the start', async () => {
    const { state, instances } = await cluster(2);
    const [a, b] = instances as [Instance, Instance];
    await a.kill();
    state.publish([assignment('r1-0')]);
    const { log, lines } = capture();
    const converged: string[][] = [];
    // The CA pin is checked against the instance that answers /cacerts: the second.
    const { trust } = await startAgent([a.url, b.url], log, converged);
    expect(trust.ca).toBeDefined();
    expect(count(b, 'cacerts')).toBe(1);
    expect(count(b, 'join')).toBe(1);
    expect(converged).toEqual([['r1-0']]);
    expect(lines.filter((l) => l.msg.startsWith('server '))).toEqual([
      expect.objectContaining({ msg: `server ${a.url} unreachable (ECONNREFUSED); using ${b.url}` }),
    ]);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('reports an outage of every instance once, naming them all, and recovers on whichever comes back', async () => {
    const { instances } = await cluster(2);
    const [a, b] = instances as [Instance, Instance];
    const { log, lines } = capture();
    await startAgent([a.url, b.url], log, []);
    await Promise.all([a.kill(), b.kill()]);
    await waitFor('the outage said', () => lines.some((l) => l.msg.startsWith('waiting for the server at')));
    await b.restart();
    await waitFor('reconnected', () => lines.some((l) => l.msg === 'reconnected to the server'));
    expect(lines.filter((l) => l.msg.startsWith('waiting for the server at')).map((l) => l.msg)).toEqual([
      `waiting for the server at ${a.url}, ${b.url} to start (ECONNREFUSED)`,
    ]);
    // A whole outage is one move line, not one per try.
    expect(lines.filter((l) => l.msg.startsWith('server ') && l.level === 30)).toHaveLength(1);
  });

  it('fetches an llmgw:// model file from the second instance when the first is gone', async () => {
    const { state, instances } = await cluster(2);
    const [a, b] = instances as [Instance, Instance];
    const body = Buffer.from('gguf bytes '.repeat(1000));
    state.files.set('m.gguf', body);
    await a.kill();
    const { log } = capture();
    const pool = new ServerPool([a.url, b.url], log);
    const files = new ModelFiles({
      cache: new ModelCache(tmp(), undefined, log),
      server: pool,
      serverClient: serverClient(TEST_CA),
      auth: { header: () => Promise.resolve(`Bearer ${state.credential}`), rejected: () => {} },
      inUse: () => new Set(),
      log,
      retryDelayMs: 10_000,
    });
    const sha256 = createHash('sha256').update(body).digest('hex');
    const started = Date.now();
    const file = await files.ensure({ url: 'llmgw://m.gguf', sha256 });
    // At once on the next instance, not after the 10 s pause between tries of one address.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(fs.readFileSync(file).equals(body)).toBe(true);
    expect(count(b, 'file')).toBe(1);
    expect(pool.current).toBe(b.url);
  });
});

describe('--server with several addresses', () => {
  it('checks each one and names the bad one: a usage error, exit 2, before anything is sent', async () => {
    expect(checkServerList('https://a:8081, https://b:8081/', false).map((u) => u.host)).toEqual(['a:8081', 'b:8081']);
    expect(() => checkServerList('https://a:8081,http://10.0.0.2:8081', false)).toThrow('refusing plain http to 10.0.0.2:8081');
    expect(() => checkServerList(' , ', false)).toThrow('invalid --server " , "');
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, LLMGW_JOIN_TOKEN: 'secret', LLMGW_STATE_DIR: tmp() };
      delete env.LLMGW_SERVER;
      execFile(process.execPath, [main, 'run', '--server', 'https://127.0.0.1:1,localhost:8081'], { env, timeout: 10_000 }, (err, _stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }),
      );
    });
    expect(r).toEqual({ code: 2, stderr: 'llmgw-agent: invalid --server "localhost:8081": want https:// (or http:// with --insecure-http)\n' });
  });
});
