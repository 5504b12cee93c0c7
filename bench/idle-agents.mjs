// The fake fleet of idle.bench.mjs, in a process of its own so that its CPU is not the
// server's: N nodes join through the agent API and then behave as idle agents do, each
// on its own keep-alive connections: a heartbeat every 5 s (a full report and the status
// of every shard assigned to it, each `ready` on a port of its own) and the assignments
// long-poll (GET /agent/v1/nodes/:id/assignments, 25 s, again at once when answered).
// No engines run: a shard is reported ready from the first beat after it is assigned.
//
//   node bench/idle-agents.mjs ADMIN_URL CA_FILE JOIN_TOKEN NODES
//
// Prints `joined N` once every node has joined, then `beats OK FAILED` every minute.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const undici = createRequire(path.join(root, 'packages/server/package.json'))('undici');
const [adminUrl, caFile, joinToken, nodesArg] = process.argv.slice(2);
const NODES = Number(nodesArg);
const BEAT_MS = 5000;
const ca = fs.readFileSync(caFile, 'utf8');

/** A CPU node's report, as an agent sends it every beat (the same while nothing changes). */
const report = (id, i) => ({
  node_id: id,
  hostname: id,
  mgmt_addr: `10.1.${i >> 8}.${i & 255}`,
  agent_version: 'bench',
  labels: { zone: `z${i % 4}` },
  memory_total_mb: 32768,
  cpu_cores: 16,
  gpus: [],
  fabrics: ['ethernet'],
  allow_command_engine: true,
});

let ok = 0;
let failed = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(n, method, p, body) {
  const r = await undici.request(`${adminUrl}${p}`, {
    method,
    dispatcher: n.dispatcher,
    headers: { authorization: `Bearer ${n.credential ?? joinToken}`, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${method} ${p}: ${r.statusCode} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

async function heartbeats(n) {
  for (;;) {
    const t = Date.now();
    const shards = n.assignments.map((a, k) => ({ id: a.id, replica_id: a.replica_id, state: 'ready', pid: 1000 + k, port: 40000 + k }));
    try {
      await call(n, 'POST', '/agent/v1/heartbeat', { report: n.report, shards, seq: ++n.seq });
      ok++;
    } catch (err) {
      failed++;
      if (failed <= 3) console.error(String(err));
    }
    await sleep(Math.max(0, BEAT_MS - (Date.now() - t)));
  }
}

async function longPoll(n) {
  for (;;) {
    try {
      const reply = await call(n, 'GET', `/agent/v1/nodes/${n.id}/assignments?after=${n.version}&wait_ms=25000`);
      n.version = reply.version;
      n.assignments = reply.assignments;
    } catch (err) {
      console.error(String(err));
      await sleep(1000);
    }
  }
}

const nodes = [];
for (let i = 0; i < NODES; i++) {
  const id = `idle-${String(i).padStart(3, '0')}`;
  // One agent's connections: a beat every 5 s keeps them open under the server's 65 s idle timeout.
  const n = {
    id,
    seq: 0,
    version: -1,
    assignments: [],
    report: report(id, i),
    dispatcher: new undici.Agent({ connections: 2, keepAliveTimeout: 60_000, connect: { ca } }),
  };
  n.credential = (await call(n, 'POST', '/agent/v1/join', { node_id: id })).credential;
  nodes.push(n);
}
console.log(`joined ${nodes.length}`);
// Beats spread over the interval, as agents started at different times are.
nodes.forEach((n, i) => {
  void longPoll(n);
  setTimeout(() => void heartbeats(n), (i * BEAT_MS) / NODES);
});
setInterval(() => console.log(`beats ${ok} ${failed}`), 60_000);
