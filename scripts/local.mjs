// `pnpm start`: llmgw on this machine with local defaults: a server on 127.0.0.1
// (client :8080, admin :8081) and an agent that joins it and serves a real model with
// the built-in CPU engine (llama.cpp through node-llama-cpp) on a tiny GGUF the agent
// writes itself, so nothing is downloaded. State lives in $LLMGW_HOME (default
// ~/.llmgw), so `pnpm ctl ...` finds the admin token and the server's CA without any
// setup. The admin listener is HTTPS, and the agent joins with the full join token
// (which pins the server's CA) as any other machine would. Ctrl-C stops everything,
// engines included.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const home = process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw');
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
const adminAddr = process.env.LLMGW_ADMIN_ADDR ?? '127.0.0.1:8081';
const clientAddr = process.env.LLMGW_CLIENT_ADDR ?? '127.0.0.1:8080';

function start(name, file, args, env = {}) {
  const log = fs.openSync(path.join(logs, `${name}.log`), 'a');
  const child = spawn(process.execPath, [path.join(root, file), ...args], {
    stdio: ['ignore', log, log],
    env: { ...process.env, LLMGW_HOME: home, ...env },
  });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`llmgw: ${name} exited (${signal ?? code}); see ${path.join(logs, `${name}.log`)}`);
      stop(1);
    }
  });
  return child;
}

let stopping = false;
const server = start('server', 'packages/server/dist/main.js', [
  '--catalog', catalog, '--admin-addr', adminAddr, '--client-addr', clientAddr, '--data-dir', path.join(home, 'server'),
]);
let agent;

// The server (re)writes the full join token before it listens, so once its admin API
// answers, the file pins the CA the agent will meet.
const serverDir = path.join(home, 'server');
const caFile = path.join(serverDir, 'tls', 'ca.pem');
const healthy = () =>
  new Promise((resolve) => {
    if (!fs.existsSync(caFile)) return resolve(false);
    const req = https.get(`https://${adminAddr}/healthz`, { ca: fs.readFileSync(caFile), timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
const deadline = Date.now() + 15_000;
while (!(await healthy())) {
  if (Date.now() > deadline) {
    console.error(`llmgw: the server did not start; see ${path.join(logs, 'server.log')}`);
    stop(1);
    await new Promise(() => {});
  }
  await new Promise((r) => setTimeout(r, 100));
}
const joinToken = fs.readFileSync(path.join(serverDir, 'join-token'), 'utf8').trim();
agent = start('agent', 'packages/agent/dist/main.js', [
  '--server', `https://${adminAddr}`, '--state-dir', path.join(home, 'agent'), '--engine-host', '127.0.0.1', '--stop-engines-on-exit',
], { LLMGW_JOIN_TOKEN: joinToken });

console.log(`llmgw is running on this machine.
  client API (OpenAI-compatible)  http://${clientAddr}/v1
  admin API, dashboard, agents    https://${adminAddr}  (CA: ${caFile})
  catalog                         ${catalog}
  logs                            ${logs}

Try, in another terminal:
  pnpm ctl nodes
  pnpm ctl replicas
  pnpm ctl keys create --name me
  curl --cacert ${caFile} https://${adminAddr}/healthz
  curl -N http://${clientAddr}/v1/chat/completions -H "Authorization: Bearer <secret>" \\
    -H 'content-type: application/json' \\
    -d '{"model":"tiny","stream":true,"messages":[{"role":"user","content":"Hello"}]}'
Ctrl-C stops the server, the agent and its engines.`);

function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  if (!agent) server.kill('SIGTERM');
  else {
    agent.kill('SIGTERM');
    agent.once('exit', () => server.kill('SIGTERM'));
  }
  server.once('exit', () => process.exit(code));
  setTimeout(() => process.exit(code), 15_000).unref();
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
