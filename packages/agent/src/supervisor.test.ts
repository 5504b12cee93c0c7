import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import type { ShardAssignment, ShardStatus } from '@llmgw/shared';
import { Supervisor, type SupervisorOptions } from './supervisor/index.js';
import { groupExists, readProcStat } from './proc.js';
import { shardAssignment, waitFor } from './testing.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, '..');
const ENGINE = path.join(pkg, '..', 'test-engine', 'dist', 'main.js');
const bins = { vllm: 'vllm', sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc' };

const tmpDirs: string[] = [];
const groups = new Set<number>();
const supervisors: Supervisor[] = [];

function tmp(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-sup-'));
  tmpDirs.push(dir);
  return dir;
}

function supervisor(stateDir: string, over: Partial<SupervisorOptions> = {}): Supervisor {
  // A random range so that parallel test runs do not fight over ports.
  const lo = 30000 + Math.floor(Math.random() * 20000);
  const s = new Supervisor({
    stateDir,
    portRange: [lo, lo + 200],
    bindHost: '127.0.0.1',
    bins,
    log: pino({ level: 'silent' }),
    healthIntervalMs: 100,
    backoffBaseMs: 50,
    maxRestarts: 3,
    stopGraceMs: 2000,
    // These tests run the test engine through `engine: command`.
    allowCommandEngine: true,
    ...over,
  });
  s.events.on('change', () => {
    for (const st of s.statuses()) if (st.pid) groups.add(st.pid);
  });
  supervisors.push(s);
  return s;
}

function testEngine(id: string, extra: string[] = [], over: Partial<ShardAssignment> = {}): ShardAssignment {
  return shardAssignment(id, {
    replica_id: `rep-${id}`,
    model: `model-${id}`,
    engine: 'command',
    source: '/dev/null',
    api_key: `key-${id}`,
    command: [process.execPath, ENGINE, '--port', '{port}', '--model', '{model}', '--api-key', '{api_key}', '--host', '{host}', ...extra],
    ...over,
  });
}

const only = (s: Supervisor): ShardStatus => {
  const all = s.statuses();
  expect(all).toHaveLength(1);
  return all[0]!;
};
const stateFile = (dir: string) =>
  JSON.parse(fs.readFileSync(path.join(dir, 'shards.json'), 'utf8')) as { shards: { id: string; pid: number; start_time: number }[] };
const launches = (dir: string, id: string) => fs.readFileSync(path.join(dir, 'logs', `${id}.log`), 'utf8').split('=== llmgw-agent ').length - 1;

beforeAll(() => {
  if (!fs.existsSync(ENGINE)) {
    execFileSync('npx', ['tsup'], { cwd: path.join(pkg, '..', 'test-engine'), stdio: 'ignore' });
  }
});

afterAll(async () => {
  for (const s of supervisors) await s.shutdown({ stopEngines: false });
  for (const g of groups) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('Supervisor with real engine processes', () => {
  const dir = tmp();
  let first: Supervisor;
  let pid = 0;

  it('starts a shard: starting → ready, in its own process group, logging to a file', async () => {
    first = supervisor(dir);
    const seen: string[] = [];
    first.events.on('change', () => seen.push(first.statuses()[0]?.state ?? 'none'));
    first.converge([testEngine('a', ['--load-delay-ms', '300'])]);
    expect(only(first).state).toBe('starting');
    const st = await waitFor('ready', () => first.statuses().find((s) => s.state === 'ready'));
    expect(seen[0]).toBe('starting');
    expect(seen).toContain('ready');
    pid = st.pid!;
    expect(readProcStat(pid)?.pgrp).toBe(pid);
    expect(st.port).toBeGreaterThanOrEqual(30000);
    expect(fs.readFileSync(path.join(dir, 'logs', 'a.log'), 'utf8')).toContain(`serving model-a on http://127.0.0.1:${st.port}`);
    expect(fs.readFileSync(path.join(dir, 'logs', 'a.log'), 'utf8')).not.toContain('key-a');
    expect(stateFile(dir).shards.map((r) => [r.id, r.pid])).toEqual([['a', pid]]);
  });

  it('leaves a matching assignment alone', async () => {
    first.converge([testEngine('a', ['--load-delay-ms', '300'])]);
    await new Promise((r) => setTimeout(r, 200));
    expect(only(first)).toMatchObject({ state: 'ready', pid, restarts: 0 });
  });

  it('restarts an engine killed by SIGKILL, on the same port', async () => {
    const before = only(first);
    process.kill(pid, 'SIGKILL');
    const after = await waitFor('restart', () => first.statuses().find((s) => s.state === 'ready' && s.pid !== pid));
    expect(after.restarts).toBe(1);
    expect(after.port).toBe(before.port);
    pid = after.pid!;
  });

  it('a new agent adopts the running engine: same pid, nothing launched, reported ready', async () => {
    await first.shutdown({ stopEngines: false });
    expect(groupExists(pid)).toBe(true);
    const launched = launches(dir, 'a');
    const second = supervisor(dir);
    await second.adopt();
    expect(only(second)).toMatchObject({ id: 'a', state: 'ready', pid, restarts: 1 });
    second.converge([testEngine('a', ['--load-delay-ms', '300'])]);
    await new Promise((r) => setTimeout(r, 300));
    expect(only(second)).toMatchObject({ state: 'ready', pid });
    expect(launches(dir, 'a')).toBe(launched);
  });

  it('notices the exit of an adopted engine (not its child) and restarts it', async () => {
    const second = supervisors[supervisors.length - 1]!;
    process.kill(pid, 'SIGKILL');
    const st = await waitFor('restart', () => second.statuses().find((s) => s.state === 'ready' && s.pid !== pid));
    expect(st.restarts).toBe(2);
    pid = st.pid!;
    await second.shutdown({ stopEngines: false });
  });

  it('stops an adopted engine that is no longer assigned: its process group is gone', async () => {
    const third = supervisor(dir);
    await third.adopt();
    expect(only(third)).toMatchObject({ state: 'ready', pid });
    third.converge([]);
    expect(third.statuses()).toEqual([]);
    await waitFor('group gone', () => !groupExists(pid));
    await waitFor('state saved', () => stateFile(dir).shards.length === 0);
  });
});

describe('Supervisor and engine keys', () => {
  // Prints its key as engines do with their settings, then serves as a follower (alive = ready).
  const blabber = (exit: boolean) =>
    `console.log('settings: api_key=' + process.env.LLMGW_ENGINE_API_KEY); ${exit ? 'process.exit(4)' : 'setInterval(() => {}, 1000)'}`;

  it('passes the key in the environment only, and masks it in the log tail it sends', async () => {
    const sup = supervisor(tmp());
    sup.converge([testEngine('secret', [], { rank: 1, shards: 2, command: [process.execPath, '-e', blabber(false), '--api-key', '{api_key}'] })]);
    const st = await waitFor('ready', () => sup.statuses().find((s) => s.state === 'ready'));
    expect(fs.readFileSync(`/proc/${st.pid}/cmdline`, 'utf8')).not.toContain('key-secret');
    expect(fs.readFileSync(`/proc/${st.pid}/environ`, 'utf8').split('\0')).toContain('LLMGW_ENGINE_API_KEY=key-secret');
    // The engine's own line, at the start of a line: the launch line the supervisor writes first quotes the script, "settings" included.
    const tail = await waitFor('printed', () => (/^settings: /m.test(sup.logTail('secret')) ? sup.logTail('secret') : undefined));
    expect(tail).toContain('settings: api_key=***');
    expect(tail).not.toContain('key-secret');
    await sup.shutdown({ stopEngines: true });
  });

  it('masks it in the failed reason', async () => {
    const sup = supervisor(tmp(), { maxRestarts: 0 });
    sup.converge([testEngine('leaky', [], { command: [process.execPath, '-e', blabber(true)] })]);
    const st = await waitFor('failed', () => sup.statuses().find((s) => s.state === 'failed'));
    expect(st.error).toContain('settings: api_key=***');
    expect(st.error).not.toContain('key-leaky');
  });
});

describe('Supervisor failure handling', () => {
  it('an engine that always crashes ends failed with its exit code and last log line', async () => {
    const sup = supervisor(tmp(), { maxRestarts: 2 });
    sup.converge([testEngine('crash', ['--exit-immediately', '3'])]);
    const st = await waitFor('failed', () => sup.statuses().find((s) => s.state === 'failed'));
    expect(st.restarts).toBe(2);
    expect(st.error).toMatch(/^exited with code 3 after 2 restarts; last log lines:\n/);
    expect(st.error).toContain('fatal: cannot load model model-crash');
    expect(st.pid).toBeUndefined();
  });

  it('a start past its deadline is killed and counts as a failure', async () => {
    const sup = supervisor(tmp(), { maxRestarts: 0 });
    sup.converge([testEngine('slow', ['--load-delay-ms', '60000'], { startup_timeout_s: 0.4 })]);
    const pid = await waitFor('pid', () => sup.statuses()[0]?.pid);
    const st = await waitFor('failed', () => sup.statuses().find((s) => s.state === 'failed'));
    expect(st.error).toMatch(/^not ready within 0.4s .*killed by SIGKILL after 0 restarts/s);
    expect(groupExists(pid)).toBe(false);
  });

  it('a ready engine that stops answering goes back to starting, and is ready again when it recovers', async () => {
    const sup = supervisor(tmp());
    sup.converge([testEngine('hang')]);
    const st = await waitFor('ready', () => sup.statuses().find((s) => s.state === 'ready'));
    process.kill(st.pid!, 'SIGSTOP'); // the kernel still accepts connections; nothing answers
    try {
      const sick = await waitFor('unhealthy', () => sup.statuses().find((s) => s.state === 'starting'));
      expect(sick.error).toMatch(/^not answering health checks/);
      expect(sick.pid).toBe(st.pid);
    } finally {
      process.kill(st.pid!, 'SIGCONT');
    }
    const back = await waitFor('ready again', () => sup.statuses().find((s) => s.state === 'ready'));
    expect(back).toMatchObject({ pid: st.pid, restarts: 0 });
    expect(back.error).toBeUndefined();
    await sup.shutdown({ stopEngines: true });
  });

  it('restarts a shard whose assignment changed', async () => {
    const sup = supervisor(tmp());
    sup.converge([testEngine('chg')]);
    const a = await waitFor('ready', () => sup.statuses().find((s) => s.state === 'ready'));
    sup.converge([testEngine('chg', ['--max-tokens-default', '4'])]);
    const b = await waitFor('ready again', () => sup.statuses().find((s) => s.state === 'ready' && s.pid !== a.pid));
    expect(groupExists(a.pid!)).toBe(false);
    expect(b.restarts).toBe(0);
    await sup.shutdown({ stopEngines: true });
    expect(groupExists(b.pid!)).toBe(false);
  });

  it('a follower is ready while alive, and its log is kept under the bound', async () => {
    const dir = tmp();
    const sup = supervisor(dir, { logMaxBytes: 20_000 });
    const chatty = `setInterval(() => console.log('${'x'.repeat(200)}'), 2)`;
    sup.converge([testEngine('follower', [], { rank: 1, shards: 2, command: [process.execPath, '-e', chatty] })]);
    await waitFor('ready', () => sup.statuses().find((s) => s.state === 'ready'));
    await new Promise((r) => setTimeout(r, 600));
    const size = fs.statSync(path.join(dir, 'logs', 'follower.log')).size;
    expect(size).toBeLessThan(20_000 + 30_000); // one poll's worth of growth past the bound at most
    expect(fs.readFileSync(path.join(dir, 'logs', 'follower.log'), 'utf8')).toContain('earlier output dropped');
    await sup.shutdown({ stopEngines: true });
  });

  it('does not adopt a recorded pid whose start time differs (the pid was reused)', async () => {
    const dir = tmp();
    const stranger = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    stranger.unref();
    const pid = stranger.pid!;
    groups.add(pid);
    const startTime = readProcStat(pid)!.startTime;
    const a = testEngine('reused');
    const record = {
      id: 'reused',
      replica_id: a.replica_id,
      fingerprint: 'v1:x',
      pid,
      pgid: pid,
      start_time: startTime + 1,
      port: 1,
      restarts: 0,
      http: true,
      assignment: a,
    };
    fs.writeFileSync(path.join(dir, 'shards.json'), JSON.stringify({ version: 1, shards: [record] }));
    const sup = supervisor(dir);
    await sup.adopt();
    expect(sup.statuses()).toEqual([]);
    expect(stateFile(dir).shards).toEqual([]);
    sup.converge([]);
    await new Promise((r) => setTimeout(r, 100));
    expect(readProcStat(pid)?.startTime).toBe(startTime); // untouched
    process.kill(-pid, 'SIGKILL');
  });
});

describe('Supervisor without --allow-command-engine', () => {
  it('launches no command engine and reports the shard failed with the way out', async () => {
    const dir = tmp();
    const s = supervisor(dir, { allowCommandEngine: false });
    s.converge([testEngine('cmd')]);
    const st = await waitFor('failed', () => only(s).state === 'failed' && only(s));
    expect(st.error).toBe('this agent does not allow engine: command (start it with --allow-command-engine, or LLMGW_ALLOW_COMMAND_ENGINE=1)');
    expect(st.pid).toBeUndefined();
    expect(fs.existsSync(path.join(dir, 'logs', 'cmd.log'))).toBe(false);
  });
});
