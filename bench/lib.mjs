// Shared helpers for the end-to-end benchmarks: real built binaries as processes on
// 127.0.0.1, like the e2e journeys, plus a keep-alive load generator on undici.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'packages/server/package.json'));
const undici = require('undici');
export const { Pool } = undici;

const children = [];
export const ADMIN = 'bench-admin';
export const JOIN = 'bench-join';

/**
 * A fresh folder for one benchmark run. Readable to all (mkdtemp makes it 0700): run as
 * root, the agent starts engines as its unprivileged engine user, which must read the
 * GGUF written here. The server and agent keep their own secrets 0700 inside it.
 */
export function tmp(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(dir, 0o755);
  return dir;
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
  const res = await undici.fetch(`${url}/api/v1${p}`, {
    ...init,
    ...(dispatcher ? { dispatcher } : {}),
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A text page of the admin listener outside the API (`/metrics`), with the bench's admin token. */
export async function adminText(url, p) {
  const dispatcher = dispatchers.get(url);
  const res = await undici.fetch(`${url}${p}`, { ...(dispatcher ? { dispatcher } : {}), headers: { authorization: `Bearer ${ADMIN}` } });
  if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
  return res.text();
}

/**
 * One built server on 127.0.0.1 (pinned to `core` when given); resolves once it prints
 * its addresses. With `databaseUrl` it keeps its state in that PostgreSQL database
 * (`--database-url`) instead of `<dir>/server/llmgw.db`. `extraArgs` go last.
 */
export async function startServer({ dir, databaseUrl, core, catalog, env = {}, extraArgs = [], logLevel = 'info' }) {
  const args = [
    '--admin-addr',
    '127.0.0.1:0',
    '--client-addr',
    '127.0.0.1:0',
    '--data-dir',
    path.join(dir, 'server'),
    '--reconcile-interval',
    '1',
    '--log-level',
    logLevel,
  ];
  if (catalog) args.push('--catalog', catalog);
  if (databaseUrl) args.push('--database-url', databaseUrl);
  const server = run(path.join(root, 'packages/server/dist/main.js'), [...args, ...extraArgs], {
    env: { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: JOIN, LLMGW_LOG_LEVEL: 'warn', ...env },
    core,
    nodeArgs: (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean),
  });
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  const m = await Promise.race([
    waitFor(async () => server.output().match(/"admin":"(https?:[^"]+)","client":"(https?:[^"]+)"/), 'server'),
    exited.then((code) => {
      throw new Error(`server exited (${code}) at start:\n${server.output().slice(-3000)}`);
    }),
  ]);
  return { ...server, pid: server.child.pid, adminUrl: m[1], clientUrl: m[2], dataDir: path.join(dir, 'server'), exited };
}

/**
 * A server (pinned to `core`) and one agent serving `catalogText`; resolves when all
 * replicas are ready. `databaseUrl`: the server on PostgreSQL rather than SQLite;
 * `serverArgs` (or `extraArgs`, the same): more flags for the server.
 */
export async function fleet(catalogText, { core, replicas = 1, databaseUrl, serverArgs = [], extraArgs = [] } = {}) {
  const dir = tmp('llmgw-bench-');
  fs.writeFileSync(path.join(dir, 'catalog.yaml'), catalogText);
  // The agent runs on this machine and reports 127.0.0.1, which the server refuses without the flag.
  const server = await startServer({
    dir,
    databaseUrl,
    core,
    catalog: path.join(dir, 'catalog.yaml'),
    extraArgs: ['--allow-loopback-nodes', ...serverArgs, ...extraArgs],
  });
  const { adminUrl, clientUrl } = server;
  const { joinToken } = serverTrust(server.dataDir, adminUrl);
  const fixtures = path.join(root, 'packages/agent/test/fixtures');
  run(
    path.join(root, 'packages/agent/dist/main.js'),
    [
      '--server',
      adminUrl,
      '--node-id',
      'bench',
      '--nvidia-smi',
      '/nonexistent',
      '--proc-root',
      path.join(fixtures, 'proc/cpu-32gb'),
      '--sys-root',
      path.join(fixtures, 'sys/empty'),
      '--state-dir',
      path.join(dir, 'agent'),
      '--heartbeat-interval',
      '1',
      '--engine-host',
      '127.0.0.1',
      '--stop-engines-on-exit',
      '--allow-command-engine',
      // Engines run as whoever runs the bench (or LLMGW_ENGINE_USER): as root, the agent would
      // otherwise want the llmgw service account, which a development machine need not have.
      '--engine-user',
      process.env.LLMGW_ENGINE_USER || os.userInfo().username,
      '--log-level',
      'warn',
    ],
    { env: { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: joinToken } },
  );
  const ready = await waitFor(
    async () => {
      const rs = await admin(adminUrl, '/replicas?show_keys=true');
      return rs.length >= replicas && rs.every((r) => r.state === 'ready') && rs;
    },
    'ready replicas',
    120_000,
  );
  const key = await admin(adminUrl, '/keys', { method: 'POST', body: JSON.stringify({ name: 'bench' }) });
  return { adminUrl, clientUrl, replicas: ready, secret: key.secret, serverPid: server.pid, dataDir: server.dataDir };
}

export function stopAll() {
  // Agents first (they stop their engines), then everything else.
  for (const c of children.slice().reverse()) c.kill('SIGTERM');
}

const clusters = [];

/**
 * A throwaway PostgreSQL cluster (scripts/test-postgres/cluster.mjs) with its default,
 * durable settings: fsync and synchronous_commit stay on, as in production, unlike the
 * tests'. `stopEverything` stops it; so does Ctrl-C.
 */
export async function benchPostgres() {
  const { startPostgres } = await import(pathToFileURL(path.join(root, 'scripts/test-postgres/cluster.mjs')).href);
  const pg = await startPostgres();
  clusters.push(pg);
  return pg;
}

/** The `pg` driver and `better-sqlite3`, as the server resolves them. */
export const serverRequire = require;

/** Stops every process started here, then every PostgreSQL cluster (and removes it). */
export async function stopEverything() {
  stopAll();
  await new Promise((r) => setTimeout(r, 500));
  await Promise.allSettled(clusters.map((c) => c.stop()));
}

/**
 * Runs a benchmark that needs a throwaway PostgreSQL: starts it (durable defaults, said
 * in the output), hands it to `body`, and stops every process and cluster whatever
 * happens; exits 1 if `body` threw.
 */
export async function withPostgres(quick, body) {
  let failed = false;
  try {
    const cluster = await benchPostgres();
    console.log(
      `PostgreSQL: a throwaway cluster on 127.0.0.1:${cluster.port}, default durable settings (fsync on, synchronous_commit on)${quick ? '; quick smoke run' : ''}`,
    );
    await body(cluster);
  } catch (err) {
    failed = true;
    console.error(err);
  } finally {
    await stopEverything();
    process.exit(failed ? 1 : 0);
  }
}

// Ctrl-C or a kill mid-run: nothing is left behind, the throwaway cluster included.
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    void stopEverything().finally(() => process.exit(130));
  });
}

/**
 * CPU seconds of a process and all its descendants, those that exited and were waited
 * for included (their parents' cutime/cstime): a PostgreSQL cluster's whole cost, every
 * backend and background worker, from the pid of the process that started it.
 */
export function treeCpuSeconds(rootPid) {
  const stats = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(name), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100 });
    } catch {
      // Gone meanwhile.
    }
  }
  let total = 0;
  const todo = [rootPid];
  while (todo.length) {
    const pid = todo.pop();
    total += stats.get(pid)?.cpu ?? 0;
    for (const [child, st] of stats) if (st.ppid === pid) todo.push(child);
  }
  return total;
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
