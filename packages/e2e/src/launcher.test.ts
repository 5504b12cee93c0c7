import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { alive, eventually, freePort, removeTmp, root, tmpDir } from './harness.js';

/**
 * A quick-start launcher killed with SIGKILL (or by the OOM killer) cannot stop its
 * server and agent: they run in process groups of their own. Its lock still names them;
 * the next `pnpm stop` or `pnpm start` must end them, not say "not running" or fail on
 * EADDRINUSE. Stand-ins play the children (long-lived processes in groups of their own
 * whose command lines name the home, as the real ones do), so nothing heavy runs.
 */

const spawned: ChildProcess[] = [];

afterAll(() => {
  for (const c of spawned) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  removeTmp();
});

/** A stand-in child: its own group, `dir` on its command line. */
function standIn(dir: string): number {
  const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)', '--', '--data-dir', dir], { detached: true, stdio: 'ignore' });
  spawned.push(c);
  return c.pid!;
}

/** A pid that named a process once and is dead now: the killed launcher's. */
async function deadPid(): Promise<number> {
  const c = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((r) => c.once('exit', r));
  return c.pid!;
}

/** A home whose lock a dead launcher left, naming a server and an agent still running. */
async function abandonedHome(): Promise<{ home: string; launcher: number; server: number; agent: number }> {
  const home = tmpDir('llmgw-leftovers-');
  const [launcher, server, agent] = [await deadPid(), standIn(path.join(home, 'server')), standIn(path.join(home, 'agent'))];
  fs.writeFileSync(path.join(home, 'local.lock'), JSON.stringify({ pid: launcher, home, server_pid: server, agent_pid: agent }) + '\n');
  return { home, launcher, server, agent };
}

function runScript(script: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [path.join(root, 'scripts', script)], { env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

describe('what a killed launcher left running', () => {
  it('pnpm stop stops it and names it, and leaves alone a recorded pid now used by another program', async () => {
    const { home, launcher, server, agent } = await abandonedHome();
    const r = await runScript('stop.mjs', { LLMGW_HOME: home });
    expect(r).toEqual({
      code: 0,
      stdout: `llmgw: stopped the server (pid ${server}), agent (pid ${agent}) left by a launcher (pid ${launcher}) that is gone (LLMGW_HOME=${home})\n`,
      stderr: '',
    });
    await eventually(() => !alive(server) && !alive(agent), 5_000, 'the leftovers gone');
    expect(fs.existsSync(path.join(home, 'local.lock'))).toBe(false);

    // The same pids, now someone else's processes (nothing of this home on their command line).
    const other = tmpDir('llmgw-other-');
    const stranger = standIn(other);
    fs.writeFileSync(path.join(home, 'local.lock'), JSON.stringify({ pid: launcher, server_pid: stranger }) + '\n');
    expect(await runScript('stop.mjs', { LLMGW_HOME: home })).toEqual({ code: 0, stdout: `llmgw: not running for LLMGW_HOME=${home}\n`, stderr: '' });
    expect(alive(stranger)).toBe(true);
  });

  it('pnpm start stops it before starting, saying so', async () => {
    const { home, launcher, server, agent } = await abandonedHome();
    // A catalog the server refuses ends this start on its own once it is past the leftovers.
    const catalog = path.join(home, 'bad-catalog.yaml');
    fs.writeFileSync(catalog, 'models: 3\n');
    const [client, admin] = [await freePort(), await freePort()];
    const r = await runScript('local.mjs', {
      LLMGW_HOME: home,
      LLMGW_CATALOG: catalog,
      LLMGW_CLIENT_ADDR: `127.0.0.1:${client}`,
      LLMGW_ADMIN_ADDR: `127.0.0.1:${admin}`,
    });
    expect(r.stdout.split('\n')[0]).toBe(
      `llmgw: the last launcher (pid ${launcher}) is gone but its server (pid ${server}), agent (pid ${agent}) still ran; stopping them`,
    );
    expect(alive(server) || alive(agent)).toBe(false);
    expect(r.code).toBe(1);
  }, 30_000);
});

describe('a port another process holds', () => {
  it('pnpm start names the process and the variable instead of failing on EADDRINUSE', async () => {
    const home = tmpDir('llmgw-port-');
    const holder = spawn(process.execPath, ['-e', "require('net').createServer().listen(0, '127.0.0.1', function () { console.log(this.address().port) })"], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    spawned.push(holder);
    const port = await new Promise<number>((r) => holder.stdout.once('data', (d: Buffer) => r(Number(String(d).trim()))));
    const r = await runScript('local.mjs', { LLMGW_HOME: home, LLMGW_CLIENT_ADDR: `127.0.0.1:${await freePort()}`, LLMGW_ADMIN_ADDR: `127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^llmgw: port ${port} \\(LLMGW_ADMIN_ADDR=127\\.0\\.0\\.1:${port}\\) is in use by pid ${holder.pid} \\(.*node.*\\): stop it, or set LLMGW_ADMIN_ADDR to another address\n$`,
      ),
    );
    expect(fs.existsSync(path.join(home, 'local.lock'))).toBe(false);
  }, 30_000);
});

describe('Ctrl-C of the launcher', () => {
  it('stops the children, says llmgw stopped and exits 0 (issue 30)', async () => {
    const home = tmpDir('llmgw-ctrl-c-');
    const catalog = path.join(home, 'catalog.yaml');
    fs.writeFileSync(
      catalog,
      `models:
  - name: tiny
    source: test
    scaling: { min: 1, max: 1 }
    profiles:
      - { name: cpu, engine: command, command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}"] }
`,
    );
    const [client, admin] = [await freePort(), await freePort()];
    const clean = { ...process.env };
    for (const k of ['LLMGW_ADMIN_TOKEN', 'LLMGW_JOIN_TOKEN', 'LLMGW_SERVER', 'LLMGW_CA']) delete clean[k];
    const launcher = spawn(process.execPath, [path.join(root, 'scripts/local.mjs')], {
      env: { ...clean, LLMGW_HOME: home, LLMGW_CATALOG: catalog, LLMGW_CLIENT_ADDR: `127.0.0.1:${client}`, LLMGW_ADMIN_ADDR: `127.0.0.1:${admin}` },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    spawned.push(launcher);
    let out = '';
    launcher.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) => launcher.once('exit', (code, signal) => r({ code, signal })));
    await eventually(() => out.includes('llmgw is running') || launcher.exitCode !== null, 60_000, 'the banner');
    const lock = JSON.parse(fs.readFileSync(path.join(home, 'local.lock'), 'utf8')) as { server_pid: number; agent_pid: number };
    // What a terminal does on Ctrl-C: SIGINT to the launcher's process group.
    process.kill(-launcher.pid!, 'SIGINT');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(out.trimEnd().split('\n').at(-1)).toBe('llmgw stopped (server, agent and engines)');
    expect([alive(lock.server_pid), alive(lock.agent_pid)]).toEqual([false, false]);
  }, 90_000);
});

describe('the quick start banner', () => {
  it('waits for tiny alone, saying every few seconds what it waits for', async () => {
    const home = tmpDir('llmgw-banner-');
    // tiny takes 8 s to load; `huge` can never be placed, and must not hold the banner back.
    const catalog = path.join(home, 'catalog.yaml');
    fs.writeFileSync(
      catalog,
      `models:
  - name: tiny
    source: test
    scaling: { min: 1, max: 1 }
    profiles:
      - { name: cpu, engine: command, command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --load-delay-ms, "8000"] }
  - name: huge
    source: test
    scaling: { min: 1, max: 1 }
    profiles:
      - { name: cpu, engine: command, min_memory_gb: 100000, command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}"] }
`,
    );
    const [client, admin] = [await freePort(), await freePort()];
    const env = { LLMGW_HOME: home, LLMGW_CATALOG: catalog, LLMGW_CLIENT_ADDR: `127.0.0.1:${client}`, LLMGW_ADMIN_ADDR: `127.0.0.1:${admin}` };
    const clean = { ...process.env };
    for (const k of ['LLMGW_ADMIN_TOKEN', 'LLMGW_JOIN_TOKEN', 'LLMGW_SERVER', 'LLMGW_CA']) delete clean[k];
    const launcher = spawn(process.execPath, [path.join(root, 'scripts/local.mjs')], {
      env: { ...clean, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    spawned.push(launcher);
    let out = '';
    launcher.stdout.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await eventually(() => out.includes('llmgw is running') || launcher.exitCode !== null, 60_000, 'the banner');
      expect(out).toContain('llmgw is running');
      expect(out).toMatch(/^llmgw: waiting for tiny \(.+\), \d+ s so far$/m);
      expect(out).not.toContain('huge');
      expect(out).not.toContain('Not ready yet');
    } finally {
      const exited = new Promise((r) => (launcher.exitCode !== null ? r(undefined) : launcher.once('exit', r)));
      await runScript('stop.mjs', { LLMGW_HOME: home });
      await exited;
    }
  }, 90_000);
});
