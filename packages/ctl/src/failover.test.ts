import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { EventView, NodeView } from '@llmgw/shared';

/**
 * `ctl --server A,B` as an operator runs it: the built binary, against two real HTTP
 * servers on 127.0.0.1 that stand in for two instances of one control plane (one shared
 * state, the few admin endpoints these commands use). `kill()` is SIGKILL to an instance:
 * its connections cut, its port refusing.
 */

const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/cli.js');

interface Shared {
  events: EventView[];
  nodes: NodeView[];
}

interface Instance {
  url: string;
  /** `METHOD path` of every request it got. */
  seen: string[];
  /** Answer this status (with llmgw's error body) to every request, while set. */
  failWith?: number;
  /** Answers its held watches (after `publish`). */
  wake(): void;
  kill(): Promise<void>;
}

const node = (id: string, over: Partial<NodeView> = {}): NodeView => ({
  id,
  state: 'ready',
  liveness: 'alive',
  labels: {},
  gpu_total: 0,
  gpu_free: 0,
  gpu_classes: [],
  fabrics: [],
  unhealthy_gpus: [],
  replicas: 0,
  ...over,
});

const event = (id: number, message: string): EventView => ({
  id,
  time: new Date().toISOString(),
  type: 'Normal',
  source: 'admin',
  reason: 'cordon',
  object: 'node/n1',
  nodes: ['n1'],
  message,
});

const instances: Instance[] = [];
const homes: string[] = [];
afterEach(async () => {
  for (const i of instances.splice(0)) await i.kill();
  for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
});

async function instance(shared: Shared): Promise<Instance> {
  const waiting = new Set<() => void>();
  const inst: Instance = {
    url: '',
    seen: [],
    wake: () => {
      for (const w of [...waiting]) w();
    },
    kill: () => Promise.resolve(),
  };
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    inst.seen.push(`${req.method} ${url.pathname}`);
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    let body = '';
    req.on('data', (c: Buffer) => (body += String(c)));
    req.on('end', () => {
      if (inst.failWith) return json(inst.failWith, { error: 'the store is unavailable', code: 'store_unavailable' });
      if (req.method === 'GET' && url.pathname === '/api/v1/nodes') return json(200, shared.nodes);
      const state = /^\/api\/v1\/nodes\/([^/]+)\/state$/.exec(url.pathname);
      if (req.method === 'POST' && state) {
        const n = shared.nodes.find((x) => x.id === state[1]);
        if (!n) return json(404, { error: 'no such node', code: 'not_found' });
        const want = (JSON.parse(body) as { state: string }).state;
        n.state = want === 'cordon' ? 'cordoned' : want === 'drain' ? 'draining' : 'ready';
        return json(200, { id: n.id, state: n.state, already: false });
      }
      if (req.method === 'GET' && url.pathname === '/api/v1/events') {
        const since = Number(url.searchParams.get('since') ?? -1);
        const answer = () => json(200, { events: shared.events.filter((e) => e.id > since), cursor: shared.events.at(-1)?.id ?? 0 });
        if (!url.searchParams.get('wait_s') || shared.events.some((e) => e.id > since)) return answer();
        // A watch: held until an event comes (`publish`), as the real long-poll is.
        const wake = () => {
          waiting.delete(wake);
          answer();
        };
        waiting.add(wake);
        return;
      }
      if (req.method === 'POST' && url.pathname === '/api/v1/keys') return json(200, { key: { id: 'key-1', name: 'ci' }, secret: 'sk-llmgw-x' });
      json(404, { error: `no route ${url.pathname}`, code: 'no_route' });
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  inst.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  inst.kill = async () => {
    const closed = new Promise<void>((r) => srv.close(() => r()));
    srv.closeAllConnections();
    await closed;
  };
  instances.push(inst);
  return inst;
}

function publish(shared: Shared, message: string, ...to: Instance[]): void {
  shared.events.push(event((shared.events.at(-1)?.id ?? 0) + 1, message));
  for (const i of to) i.wake();
}

function env(): NodeJS.ProcessEnv {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-ctl-home-'));
  homes.push(home);
  const e: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', LLMGW_HOME: home, LLMGW_ADMIN_TOKEN: 'admin-token' };
  delete e.LLMGW_SERVER;
  delete e.LLMGW_CA;
  return e;
}

function ctl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { env: env(), timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

const shared = (): Shared => ({ events: [event(1, 'first')], nodes: [node('n1')] });

describe('ctl --server A,B', () => {
  it('reads from the second instance when the first is dead, or answers 503', async () => {
    const s = shared();
    const a = await instance(s);
    const b = await instance(s);
    a.failWith = 503;
    const r1 = await ctl(['--server', `${a.url},${b.url}`, 'nodes', '-o', 'json']);
    expect(r1).toMatchObject({ code: 0, stderr: '' });
    expect((JSON.parse(r1.stdout) as NodeView[]).map((n) => n.id)).toEqual(['n1']);
    expect(a.seen).toEqual(['GET /api/v1/nodes']);
    await a.kill();
    const r2 = await ctl(['--server', `${a.url},${b.url}`, 'nodes', '-o', 'json']);
    expect(r2).toMatchObject({ code: 0, stderr: '' });
    expect(b.seen).toEqual(['GET /api/v1/nodes', 'GET /api/v1/nodes']);
  });

  it('sends a write to the second instance when the first refuses the connection, once', async () => {
    const s = shared();
    const a = await instance(s);
    const b = await instance(s);
    await a.kill();
    const r = await ctl(['--server', `${a.url},${b.url}`, 'cordon', 'n1']);
    expect(r).toMatchObject({ code: 0, stdout: 'node/n1 cordoned\n' });
    expect(b.seen).toEqual(['POST /api/v1/nodes/n1/state']);
  });

  it('does not repeat a POST on the second instance after a 503 from the first, which got it', async () => {
    const s = shared();
    const a = await instance(s);
    const b = await instance(s);
    a.failWith = 503;
    const r = await ctl(['--server', `${a.url},${b.url}`, 'keys', 'create', '--name', 'ci']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: the store is unavailable (not repeated on another server: ${a.url} may have applied it; check before running it again)\n`);
    expect(a.seen).toEqual(['POST /api/v1/keys']);
    expect(b.seen).toEqual([]);
  });

  it('keeps watching events on the second instance when the first is killed mid-watch', async () => {
    const s = shared();
    const a = await instance(s);
    const b = await instance(s);
    const child = spawn(process.execPath, [cli, '--server', `${a.url},${b.url}`, 'events', '-w', '-o', 'json'], { env: env() });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += String(c)));
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += String(c)));
    const until = async (what: string, ok: () => boolean) => {
      const end = Date.now() + 10_000;
      while (!ok()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}; stdout: ${out}; stderr: ${err}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    try {
      await until('the first event', () => out.includes('"first"'));
      publish(s, 'second', a);
      await until('an event through the first instance', () => out.includes('"second"'));
      await until('the watch held on the first instance', () => a.seen.filter((x) => x === 'GET /api/v1/events').length >= 3);
      await a.kill();
      await until('the watch on the second instance', () => b.seen.includes('GET /api/v1/events'));
      publish(s, 'third', b);
      await until('an event through the second instance', () => out.includes('"third"'));
      expect(child.exitCode).toBeNull();
      expect(
        out
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as EventView).message),
      ).toEqual(['first', 'second', 'third']);
      expect(err).toBe('');
    } finally {
      child.kill();
    }
  });

  it('follows a drain to its end on the second instance when the first dies during it', async () => {
    const s = shared();
    s.nodes = [node('n1', { replicas: 1, drain_status: 'waiting for 1 replacement' })];
    const a = await instance(s);
    const b = await instance(s);
    const child = spawn(process.execPath, [cli, '--server', `${a.url},${b.url}`, 'drain', 'n1'], { env: env() });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += String(c)));
    const done = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const end = Date.now() + 10_000;
      while (a.seen.filter((x) => x === 'GET /api/v1/nodes').length < 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
      await a.kill();
      s.nodes[0]!.replicas = 0;
      expect(await done).toBe(0);
      expect(out).toBe('node/n1 draining\nnode/n1 drained\n');
      expect(a.seen[0]).toBe('POST /api/v1/nodes/n1/state');
      expect(b.seen).toContain('GET /api/v1/nodes');
      expect(b.seen).not.toContain('POST /api/v1/nodes/n1/state');
    } finally {
      child.kill();
    }
  });

  it('names every address when none answers (exit 3), and a bad one before sending anything (exit 2)', async () => {
    const s = shared();
    const a = await instance(s);
    const b = await instance(s);
    await a.kill();
    await b.kill();
    const r = await ctl(['--server', `${a.url},${b.url}`, 'nodes']);
    expect(r).toMatchObject({
      code: 3,
      stderr: `error: cannot reach any llmgw server: ${a.url} (ECONNREFUSED), ${b.url} (ECONNREFUSED); are they running? (addresses set by --server)\n`,
    });
    const bad = await ctl(['--server', `${a.url},localhost:8081`, 'nodes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.split('\n')[0]).toBe('error: invalid --server "localhost:8081": a URL needs its scheme: https://localhost:8081');
  });
});
