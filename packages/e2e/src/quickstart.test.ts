import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { alive, bins, eventually, freePort, removeTmp, root, tmpDir } from './harness.js';

/**
 * The quick start as a new user lives it: `pnpm start` (the launcher it runs after the
 * build) in a terminal, a second `pnpm start` by mistake, the terminal closed (SIGHUP to
 * its process group), and a catalog typo. The launcher runs in a process group of its own,
 * as a terminal's foreground job does, on a temporary LLMGW_HOME and free ports.
 */

const launcher = path.join(root, 'scripts/local.mjs');

interface Launch {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** The exit code (or the signal's name). */
  exited: Promise<number | string>;
}

const launched: ChildProcess[] = [];

function launch(env: Record<string, string>): Launch {
  const clean = { ...process.env };
  // The quick start generates its own secrets and catalog; a developer's shell must not leak in.
  for (const k of ['LLMGW_ADMIN_TOKEN', 'LLMGW_JOIN_TOKEN', 'LLMGW_CATALOG', 'LLMGW_SERVER', 'LLMGW_CA']) delete clean[k];
  const child = spawn(process.execPath, [launcher], { cwd: root, env: { ...clean, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  launched.push(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

interface ShardRecord {
  pid: number;
  pgid: number;
  restarts: number;
  replica_id: string;
}

const shardsOf = (home: string): ShardRecord[] => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(home, 'agent', 'shards.json'), 'utf8')) as { shards: ShardRecord[] }).shards;
  } catch {
    return [];
  }
};

/** Every file under `dir` with its size and mtime: what "touches nothing" compares. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const f = path.join(e.parentPath, e.name);
    const st = fs.statSync(f);
    out[path.relative(dir, f)] = `${st.size}@${st.mtimeMs}`;
  }
  return out;
}

const homes: string[] = [];

/** Every process whose command line names `dir`: the launcher's children all do (data, state and model paths). */
function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(dir)) pids.push(Number(e));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

afterAll(() => {
  // Whatever a failed step left behind: launchers, the server and agent (groups of their
  // own) and the engines (likewise).
  for (const c of launched) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (const home of homes) {
    for (const pid of processesUnder(home)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  removeTmp();
});

describe('the quick start', () => {
  it('runs one instance per LLMGW_HOME, stops its whole tree on SIGHUP or pnpm stop, and fails loudly on a bad catalog', async () => {
    const home = tmpDir('llmgw-quickstart-');
    homes.push(home);
    const [clientPort, adminPort] = [await freePort(), await freePort()];
    const env = { LLMGW_HOME: home, LLMGW_CLIENT_ADDR: `127.0.0.1:${clientPort}`, LLMGW_ADMIN_ADDR: `127.0.0.1:${adminPort}` };
    const adminUrl = `https://127.0.0.1:${adminPort}`;

    // 1. The banner comes once the ports answer and the model is ready, with the exact
    //    variables for ctl, since neither the home nor the ports are the defaults.
    const first = launch(env);
    await eventually(() => first.stdout().includes('llmgw is running') || first.child.exitCode !== null, 90_000, 'the banner');
    expect(first.stderr()).toBe('');
    expect(first.stdout()).toContain(`export LLMGW_HOME=${home} LLMGW_SERVER=${adminUrl}\n`);
    expect(first.stdout()).toContain(`http://127.0.0.1:${clientPort}/v1`);
    const ctlEnv = {
      LLMGW_HOME: home,
      LLMGW_SERVER: adminUrl,
      LLMGW_CA: path.join(home, 'server/tls/ca.pem'),
      LLMGW_ADMIN_TOKEN: fs.readFileSync(path.join(home, 'server/admin-token'), 'utf8').trim(),
    };
    const replicas = () => ctlJsonWith<{ id: string; model: string; state: string }[]>(adminUrl, ['replicas'], ctlEnv);
    // Ready when the banner says so: no waiting here.
    expect((await replicas()).map((r) => [r.model, r.state])).toEqual([['tiny', 'ready']]);
    const engines = shardsOf(home);
    expect(engines).toHaveLength(1);
    const lock = JSON.parse(fs.readFileSync(path.join(home, 'local.lock'), 'utf8')) as { pid: number; server_pid: number; agent_pid: number };
    expect(lock.pid).toBe(first.child.pid);

    // 2. A second start refuses in one line naming the running instance, exit 1, and
    //    touches nothing: no file changes, the engine keeps its pid and restart count.
    const before = snapshot(home);
    const second = launch(env);
    expect(await within(second.exited, 10_000, 'the second start')).toBe(1);
    expect(second.stdout()).toBe('');
    expect(second.stderr()).toBe(
      `llmgw: already running for LLMGW_HOME=${home} (pid ${first.child.pid}, client 127.0.0.1:${clientPort}, admin 127.0.0.1:${adminPort}): stop it with \`pnpm stop\`, or set LLMGW_HOME to start another\n`,
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(shardsOf(home).map((s) => [s.pid, s.restarts])).toEqual(engines.map((s) => [s.pid, s.restarts]));
    expect(snapshot(home)).toEqual(before);
    expect(await replicas()).toEqual([expect.objectContaining({ state: 'ready' })]);

    // 3. Closing the terminal: SIGHUP to the launcher's process group stops the launcher,
    //    the server (which alone would take SIGHUP for a catalog reload), the agent and
    //    the engine, within 10 s, and frees the lock.
    const pids = [lock.pid, lock.server_pid, lock.agent_pid, ...engines.map((e) => e.pid)];
    expect(pids.every(alive)).toBe(true);
    process.kill(-first.child.pid!, 'SIGHUP');
    await eventually(() => !pids.some(alive), 10_000, `no llmgw process left of ${pids.join(', ')}`);
    expect(fs.existsSync(path.join(home, 'local.lock'))).toBe(false);
    expect(await pnpmStop(home)).toEqual({ code: 0, stdout: `llmgw: not running for LLMGW_HOME=${home}\n` });

    // 4. A catalog with two errors: the start fails, non-zero, with both of the server's
    //    errors in the terminal, not only in its log, the enum typo with its "did you mean".
    const catalog = path.join(home, 'catalog.yaml');
    const good = fs.readFileSync(catalog, 'utf8');
    fs.writeFileSync(catalog, good.replace('engine: node-llama-cpp', 'engine: node-lama-cpp').replace('min: 1,', 'min: one,'));
    const broken = launch(env);
    expect(await within(broken.exited, 20_000, 'the start with a bad catalog')).toBe(1);
    const problems = broken
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith(`llmgw-server: catalog ${catalog}: model "tiny" (line `));
    expect(problems).toHaveLength(2);
    expect(problems.join('\n')).toMatch(/scaling\.min .*\n.*engine must be one of .*\(did you mean node-llama-cpp\?\)/);
    expect(broken.stderr()).toMatch(/^llmgw: the server exited \(code 2\); its log: .*server\.log$/m);
    expect(broken.stdout()).not.toContain('llmgw is running');
    expect(fs.existsSync(path.join(home, 'local.lock'))).toBe(false);

    // 5. Fixed, it starts again on the same ports (nothing was left holding them), and
    //    `pnpm stop` from another terminal stops the whole tree.
    fs.writeFileSync(catalog, good);
    const again = launch(env);
    await eventually(() => again.stdout().includes('llmgw is running') || again.child.exitCode !== null, 90_000, 'the banner again');
    expect(again.stderr()).toBe('');
    const lock2 = JSON.parse(fs.readFileSync(path.join(home, 'local.lock'), 'utf8')) as { pid: number; server_pid: number; agent_pid: number };
    const pids2 = [lock2.pid, lock2.server_pid, lock2.agent_pid, ...shardsOf(home).map((e) => e.pid)];
    expect(pids2).toHaveLength(4);
    expect(await pnpmStop(home)).toEqual({ code: 0, stdout: `llmgw: stopped (pid ${again.child.pid}, LLMGW_HOME=${home})\n` });
    expect(await within(again.exited, 1000, 'the launcher after pnpm stop')).toBe(0);
    expect(pids2.filter(alive)).toEqual([]);
  }, 150_000);
});

/** `pnpm stop` (scripts/stop.mjs, which it runs) for `home`. */
function pnpmStop(home: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [path.join(root, 'scripts/stop.mjs')], { env: { ...process.env, LLMGW_HOME: home } }, (err, stdout) =>
      resolve({ code: err ? 1 : 0, stdout }),
    ),
  );
}

/** `ctlJson` with this instance's own home, token and CA instead of the harness's. */
function ctlJsonWith<T>(server: string, args: string[], env: Record<string, string>): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [bins.ctl, ...args, '-o', 'json'],
      { env: { ...process.env, NO_COLOR: '1', ...env, LLMGW_SERVER: server } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`ctl ${args.join(' ')} failed: ${stderr}`));
        else resolve(JSON.parse(stdout) as T);
      },
    );
  });
}
