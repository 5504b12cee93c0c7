// Shared helpers for the end-to-end benchmarks: real built binaries as processes on
// 127.0.0.1, like the e2e journeys, plus a keep-alive load generator on undici.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'packages/server/package.json'));
const undici = require('undici');
export const { Pool } = undici;

const children = [];
export const ADMIN = 'bench-admin';
const JOIN = 'bench-join';

export function tmp(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Runs a built entry point, optionally pinned to one core so its cost is measurable. */
export function run(file, args, { env = {}, core, nodeArgs = [] } = {}) {
  const hasTaskset = core !== undefined && spawnOk('taskset', ['-c', '0', 'true']);
  const cmd = hasTaskset ? 'taskset' : process.execPath;
  const argv = hasTaskset ? ['-c', String(core), process.execPath, ...nodeArgs, file, ...args] : [...nodeArgs, file, ...args];
  const child = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  children.push(child);
  return { child, output: () => out };
}

function spawnOk(cmd, args) {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function waitFor(fn, what, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const dispatchers = new Map();

/**
 * What a started server wrote for its agents and operators: the full join token and its
 * CA (as ctl's LLMGW_CA); `admin()` then verifies that server against the CA alone.
 */
export function serverTrust(dataDir, adminUrl) {
  const caFile = path.join(dataDir, 'tls', 'ca.pem');
  dispatchers.set(adminUrl, new undici.Agent({ connect: { ca: fs.readFileSync(caFile, 'utf8') } }));
  return { caFile, joinToken: fs.readFileSync(path.join(dataDir, 'join-token'), 'utf8').trim() };
}

export async function admin(url, p, init = {}) {
  const dispatcher = dispatchers.get(url);
  const res = await undici.fetch(`${url}/api/v1${p}`, { ...init, ...(dispatcher ? { dispatcher } : {}), headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });
  if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A server (pinned to `core`) and one agent serving `catalogText`; resolves when all replicas are ready. */
export async function fleet(catalogText, { core, replicas = 1 } = {}) {
  const dir = tmp('llmgw-bench-');
  fs.writeFileSync(path.join(dir, 'catalog.yaml'), catalogText);
  const env = { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: JOIN, LLMGW_LOG_LEVEL: 'warn' };
  const server = run(path.join(root, 'packages/server/dist/main.js'), ['--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0', '--data-dir', path.join(dir, 'server'), '--catalog', path.join(dir, 'catalog.yaml'), '--reconcile-interval', '1', '--log-level', 'info'], { env, core, nodeArgs: (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean) });
  const m = await waitFor(async () => server.output().match(/"admin":"(https?:[^"]+)","client":"(https?:[^"]+)"/), 'server');
  const [adminUrl, clientUrl] = [m[1], m[2]];
  const { joinToken } = serverTrust(path.join(dir, 'server'), adminUrl);
  const fixtures = path.join(root, 'packages/agent/test/fixtures');
  run(path.join(root, 'packages/agent/dist/main.js'), ['--server', adminUrl, '--node-id', 'bench', '--nvidia-smi', '/nonexistent', '--proc-root', path.join(fixtures, 'proc/cpu-32gb'), '--sys-root', path.join(fixtures, 'sys/empty'), '--state-dir', path.join(dir, 'agent'), '--heartbeat-interval', '1', '--engine-host', '127.0.0.1', '--stop-engines-on-exit', '--allow-command-engine', '--log-level', 'warn'], { env: { ...env, LLMGW_JOIN_TOKEN: joinToken } });
  const ready = await waitFor(async () => {
    const rs = await admin(adminUrl, '/replicas?show_keys=true');
    return rs.length >= replicas && rs.every((r) => r.state === 'ready') && rs;
  }, 'ready replicas', 120_000);
  const key = await admin(adminUrl, '/keys', { method: 'POST', body: JSON.stringify({ name: 'bench' }) });
  return { adminUrl, clientUrl, replicas: ready, secret: key.secret, serverPid: server.child.pid };
}

export function stopAll() {
  // Agents first (they stop their engines), then everything else.
  for (const c of children.slice().reverse()) c.kill('SIGTERM');
}

/** Process CPU seconds (user + system) from /proc, for per-core throughput figures. */
export function cpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
}

/** The node pid of a `taskset … node` process is the taskset pid itself (taskset execs). */
export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function table(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
