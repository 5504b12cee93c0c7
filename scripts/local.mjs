// `pnpm start`: llmgw on this machine with local defaults: a server on 127.0.0.1
// (client :8080, admin :8081; LLMGW_CLIENT_ADDR / LLMGW_ADMIN_ADDR move them) and an
// agent that joins it and serves a real model with the built-in CPU engine (llama.cpp
// through node-llama-cpp) on a tiny GGUF the agent writes itself, so nothing is
// downloaded. State lives in $LLMGW_HOME (default ~/.llmgw), so `ctl` finds the admin
// token and the server's CA without any setup. The admin listener is HTTPS, and the agent
// joins with the full join token (which pins the server's CA) as any other machine would.
//
// One process tree: one instance per LLMGW_HOME (scripts/local/lock.mjs); the server and
// the agent in process groups of their own, stopped by this launcher on SIGINT, SIGTERM
// and SIGHUP, engines included; a child that fails has its error in this terminal and the
// launcher exits 1. `pnpm stop` (scripts/stop.mjs) stops an instance from elsewhere. The
// lock names the children, so what a killed launcher left running is stopped by the next
// start or stop (scripts/local/leftovers.mjs).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { acquire, refusal, release, update } from './local/lock.mjs';
import { describeLeftovers, leftovers, stopLeftovers } from './local/leftovers.mjs';
import { listenerOn } from './local/ports.mjs';
import { killRecordedEngines, lastLoggedError, startChild, stopChildren } from './local/children.mjs';
import { get, listening, sleep, unreadyModels } from './local/ready.mjs';

const DEFAULT_CLIENT = '127.0.0.1:8080';
const DEFAULT_ADMIN = '127.0.0.1:8081';
/** How long the server and the agent get to stop (engines included) before SIGKILL. */
const STOP_GRACE_MS = 7_000;
const SERVER_START_MS = 30_000;
/** The engine's own startup_timeout_s in the quick start's catalog is 120 s. */
const MODEL_READY_MS = 150_000;
/**
 * The models the banner waits for: the quick start's own (README: "once both ports answer
 * and `tiny` is ready"). Models added to the catalog come up after the banner, in `ctl models`.
 */
const QUICK_START_MODELS = ['tiny'];
/** How often the wait for them says what it waits for. */
const PROGRESS_MS = 5_000;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const defaultHome = path.join(os.homedir(), '.llmgw');
const home = path.resolve(process.env.LLMGW_HOME ?? defaultHome);
const adminAddr = process.env.LLMGW_ADMIN_ADDR || DEFAULT_ADMIN;
const clientAddr = process.env.LLMGW_CLIENT_ADDR || DEFAULT_CLIENT;

// A closed terminal turns every write into EIO: the launcher must still stop its children.
for (const s of [process.stdout, process.stderr]) s.on('error', () => {});

// Before anything else is written: a second instance touches nothing.
fs.mkdirSync(home, { recursive: true });
let lockInfo = { home, client_addr: clientAddr, admin_addr: adminAddr, started_at: new Date().toISOString() };
const lock = acquire(home, lockInfo);
if (!lock.ok) {
  console.error(refusal(home, lock.held));
  process.exit(1);
}
// A launcher that was killed (SIGKILL, OOM) could not stop its children: they still hold
// the ports and the store, and this start would fail on EADDRINUSE.
const left = leftovers(home, lock.stale);
if (left.length > 0) {
  console.log(`llmgw: the last launcher (pid ${lock.stale.pid}) is gone but its ${describeLeftovers(left)} still ran; stopping them`);
  await stopLeftovers(home, left, STOP_GRACE_MS);
}

// `pnpm start` builds after the lock, so a refused second start prints its one line and
// nothing else; the build's own output only when it fails.
if (process.argv.includes('--build')) {
  console.log('llmgw: building (turbo run build)');
  const b = spawnSync(path.join(root, 'node_modules', '.bin', 'turbo'), ['run', 'build', '--output-logs=errors-only'], { cwd: root, encoding: 'utf8' });
  if (b.status !== 0) {
    process.stderr.write(`${b.stdout ?? ''}${b.stderr ?? ''}`);
    console.error(`llmgw: the build failed (${b.error?.message ?? `exit ${b.status}`}); nothing was started`);
    release(home);
    process.exit(1);
  }
}

let stopping = false;
let server;
let agent;
const agentState = path.join(home, 'agent');

/** Stops the children (agent and server at once; the agent stops its engines), then exits. */
async function stop(code) {
  if (stopping) {
    // A second Ctrl-C: no more waiting.
    for (const c of [agent, server]) if (c && !c.exited) process.kill(-c.child.pid, 'SIGKILL');
    return;
  }
  stopping = true;
  await stopChildren([agent, server], STOP_GRACE_MS);
  killRecordedEngines(agentState);
  release(home);
  // Ctrl-C is the way to stop the quick start, not a failure: say that it ended, and exit 0.
  if (code === 0) console.log('llmgw stopped (server, agent and engines)');
  process.exit(code);
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void stop(0));

/** A child that exits while llmgw runs ends the launcher, with the child's own error line. */
function watch(c) {
  void c.done.then(() => {
    if (stopping) return;
    if (c.stderrLines === 0) {
      const line = lastLoggedError(c.log, c.logStart);
      if (line) console.error(`llmgw-${c.name}: ${line}`);
    }
    console.error(`llmgw: the ${c.name} exited (${c.signal ?? `code ${c.code}`}); its log: ${c.log}`);
    void stop(1);
  });
}

function launch(name, file, args, env = {}) {
  const log = path.join(logs, `${name}.log`);
  const logStart = fs.existsSync(log) ? fs.statSync(log).size : 0;
  const c = startChild({ name, file: path.join(root, file), args, env: { ...process.env, LLMGW_HOME: home, ...env }, log });
  c.logStart = logStart;
  watch(c);
  return c;
}

/** Waits for `check` to return something, while the children live; false at the deadline. */
async function until(check, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (stopping) await new Promise(() => {});
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) return false;
    await sleep(200);
  }
}

const logs = path.join(home, 'logs');
fs.mkdirSync(logs, { recursive: true });
// The first start writes a catalog the operator can then edit while llmgw runs.
const model = path.join(home, 'models', 'tiny-llama.gguf');
if (!fs.existsSync(model)) {
  fs.mkdirSync(path.dirname(model), { recursive: true });
  execFileSync(process.execPath, [path.join(root, 'packages/agent/dist/main.js'), 'make-test-model', '--out', model], { stdio: 'ignore' });
}
const catalog = process.env.LLMGW_CATALOG ?? path.join(home, 'catalog.yaml');
if (!process.env.LLMGW_CATALOG && !fs.existsSync(catalog)) {
  const template = fs.readFileSync(path.join(root, 'examples/local-catalog.yaml'), 'utf8');
  fs.writeFileSync(catalog, template.replaceAll('${MODEL_PATH}', model));
}

// A port another process holds would fail the server with a bare EADDRINUSE: name the
// process (a leftover of another LLMGW_HOME, another llmgw, anything) and the variable.
for (const [addr, variable] of [
  [clientAddr, 'LLMGW_CLIENT_ADDR'],
  [adminAddr, 'LLMGW_ADMIN_ADDR'],
]) {
  const port = Number(/:(\d+)$/.exec(addr)?.[1]);
  const holder = port > 0 ? listenerOn(port) : undefined;
  if (!holder) continue;
  const who = holder.pid === undefined ? "another user's process" : `pid ${holder.pid}${holder.command ? ` (${holder.command.slice(0, 200)})` : ''}`;
  console.error(`llmgw: port ${port} (${variable}=${addr}) is in use by ${who}: stop it, or set ${variable} to another address`);
  release(home);
  process.exit(1);
}

const serverDir = path.join(home, 'server');
server = launch('server', 'packages/server/dist/main.js', [
  '--catalog',
  catalog,
  '--admin-addr',
  adminAddr,
  '--client-addr',
  clientAddr,
  '--data-dir',
  serverDir,
  // One machine: the agent's engines are at 127.0.0.1, which a fleet server refuses.
  '--allow-loopback-nodes',
]);
// Recorded at once: a launcher killed before the server answers must not leave it unnamed.
update(home, { ...lockInfo, server_pid: server.child.pid });

// The server (re)writes the full join token before it listens, so once its admin API
// answers, the file pins the CA the agent will meet.
const caFile = path.join(serverDir, 'tls', 'ca.pem');
const urls = await until(async () => {
  const at = listening(server.log, server.logStart);
  if (!at || !fs.existsSync(caFile)) return undefined;
  const r = await get(`${at.admin}/healthz`, { ca: fs.readFileSync(caFile) });
  return r?.status === 200 ? at : undefined;
}, SERVER_START_MS);
if (!urls) {
  console.error(`llmgw: the server did not answer within ${SERVER_START_MS / 1000} s; its log: ${server.log}`);
  await stop(1);
}
const hostPort = (u) => new URL(u).host;
lockInfo = { ...lockInfo, client_addr: hostPort(urls.client), admin_addr: hostPort(urls.admin), server_pid: server.child.pid };
update(home, lockInfo);

const joinToken = fs.readFileSync(path.join(serverDir, 'join-token'), 'utf8').trim();
agent = launch(
  'agent',
  'packages/agent/dist/main.js',
  [
    '--server',
    urls.admin,
    '--state-dir',
    agentState,
    '--engine-host',
    '127.0.0.1',
    '--stop-engines-on-exit',
    // Engines run as you, on your own machine (even as root, where a service would default
    // to the llmgw account); and a catalog you edit here may use `engine: command`.
    '--allow-command-engine',
    '--engine-user',
    os.userInfo().username,
  ],
  { LLMGW_JOIN_TOKEN: joinToken },
);
update(home, { ...lockInfo, agent_pid: agent.child.pid });

const ca = fs.readFileSync(caFile);
const adminToken = process.env.LLMGW_ADMIN_TOKEN || fs.readFileSync(path.join(serverDir, 'admin-token'), 'utf8').trim();
await until(async () => (await get(`${urls.client}/v1/models`)) !== undefined, SERVER_START_MS);
let unready = QUICK_START_MODELS.map((name) => ({ name, summary: 'the admin API does not answer yet' }));
const waitingSince = Date.now();
let progressAt = waitingSince + PROGRESS_MS;
const describeUnready = () => unready.map((m) => `${m.name} (${m.summary})`).join('; ');
const ready = await until(async () => {
  unready = (await unreadyModels(urls.admin, ca, adminToken, QUICK_START_MODELS)) ?? unready;
  if (unready.length > 0 && Date.now() >= progressAt) {
    progressAt = Date.now() + PROGRESS_MS;
    console.log(`llmgw: waiting for ${describeUnready()}, ${Math.round((Date.now() - waitingSince) / 1000)} s so far`);
  }
  return unready.length === 0;
}, MODEL_READY_MS);

const env = [home !== defaultHome && `LLMGW_HOME=${home}`, hostPort(urls.admin) !== DEFAULT_ADMIN && `LLMGW_SERVER=${urls.admin}`].filter(Boolean);
const notReady = ready ? '' : `\nNot ready yet: ${describeUnready()}; see ctl models and ${logs}\n`;
console.log(`llmgw is running on this machine (pid ${process.pid}).
  client API (OpenAI-compatible)  ${urls.client}/v1
  admin API, dashboard, agents    ${urls.admin}  (CA: ${caFile})
  catalog                         ${catalog}
  logs                            ${logs}
${notReady}
Try, in another terminal:
  export PATH="${path.join(root, 'node_modules', '.bin')}:$PATH"${env.length ? `\n  export ${env.join(' ')}` : ''}
  ctl nodes
  ctl replicas
  ctl keys create --name me
  curl --cacert ${caFile} ${urls.admin}/healthz
  curl -N ${urls.client}/v1/chat/completions -H "Authorization: Bearer <secret>" \\
    -H 'content-type: application/json' \\
    -d '{"model":"tiny","stream":true,"messages":[{"role":"user","content":"Hello"}]}'
Ctrl-C (or pnpm stop) stops the server, the agent and its engines.`);
