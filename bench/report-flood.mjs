// Issue 27: one join token, many fake nodes reporting as much as the server takes. N
// nodes (default 140) join through the agent API of a real server (SQLite) and report at
// the cap (default REPORT_LIMITS.reportBytes, 256 KiB: GPUs full of problems, then labels),
// a new report every beat so each one is written. Meanwhile /healthz is asked on both
// listeners every 20 ms, and a reader lists the fleet back to back as `ctl nodes` does
// (every page of GET /api/v1/nodes). Phases: (a) steady, each node beating every 5 s as
// an agent does; (b) a burst, every node's heartbeat at once, three times; then one report
// a byte over the cap, and the store's size before and after deleting every node.
//
//   node bench/report-flood.mjs [--nodes=140] [--report-bytes=262144] [--seconds=20]
//                               [--no-list]      without the reader listing the fleet
//                               [--server=DIR]   a built checkout to run instead (a baseline)
//
// Against a build from before the caps, `--report-bytes=3900000` is the issue's repro.
// The goal: /healthz under 200 ms on both listeners throughout.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ADMIN, JOIN, percentile, root, run, stopAll, table, tmp, waitFor } from './lib.mjs';
import { createRequire } from 'node:module';

const arg = (name, dflt) => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(name.length + 3) : dflt;
};
const NODES = Number(arg('nodes', 140));
const BYTES = Number(arg('report-bytes', 256 * 1024));
const SECONDS = Number(arg('seconds', 20));
const TREE = path.resolve(arg('server', root));
const BEAT_MS = 5000;
/** `--no-list`: no reader listing the fleet meanwhile, so the figures are the reports' alone. */
const LIST = !process.argv.includes('--no-list');
/** An idle HTTP server with a /healthz, printing its URL. */
const IDLE_SERVER = `const s = require('node:http').createServer((q, r) => r.end('{}')); s.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + s.address().port));`;
const undici = createRequire(path.join(root, 'packages/server/package.json'))('undici');

/** A report of exactly `bytes` bytes as JSON: GPUs full of problems (issue 27's shape), then labels. `@SEQ@` becomes a 5-digit number per beat. */
function reportOf(id, bytes) {
  // Within today's bounds (16 problems of 256 characters) up to the cap; the old bounds
  // (64 of 1,000) for a larger repro against an old build.
  const [per, chars] = bytes <= 270_000 ? [16, 256] : [64, 1000];
  const problems = Array.from({ length: per }, (_, i) => `p${i}`.padEnd(chars, '.'));
  const r = { node_id: id, hostname: id, mgmt_addr: '10.0.0.1', agent_version: 'bench', labels: {}, memory_total_mb: 0, gpus: [], fabrics: [] };
  const size = () => Buffer.byteLength(JSON.stringify(r).replace('"memory_total_mb":0', '"memory_total_mb":@SEQ@'));
  const gpu = (index) => ({ index, name: 'NVIDIA H100', class: 'H100-80GB', problems });
  while (r.gpus.length < 64 && size() + JSON.stringify(gpu(99)).length + 3000 < bytes) r.gpus.push(gpu(r.gpus.length));
  for (let i = 0, left = bytes - size(); left > 0; i++, left = bytes - size()) {
    const overhead = `,"l${i}":""`.length - (i === 0 ? 1 : 0);
    r.labels[`l${i}`] = 'v'.repeat(left - overhead <= 1024 ? left - overhead : Math.min(1024, left - overhead - 16));
  }
  return JSON.stringify({ report: r, shards: [] }).replace('"memory_total_mb":0', '"memory_total_mb":@SEQ@');
}

const dir = tmp('llmgw-flood-');
const dataDir = path.join(dir, 'server');
const server = run(
  path.join(TREE, 'packages/server/dist/main.js'),
  ['--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0', '--data-dir', dataDir, '--log-level', 'info'],
  // Joins are rate-limited now (--join-rate, default 60 a minute): raised here so that all
  // N join in a moment and the flood is the reports. An older build ignores the variable.
  {
    env: { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: JOIN, LLMGW_JOIN_RATE: String(NODES * 2) },
    nodeArgs: (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean),
  },
);
try {
  const m = await waitFor(async () => server.output().match(/"admin":"(https?:[^"]+)","client":"(https?:[^"]+)"/), 'server');
  const [adminUrl, clientUrl] = [m[1], m[2]];
  const ca = fs.readFileSync(path.join(dataDir, 'tls', 'ca.pem'), 'utf8');
  const beats = new undici.Agent({ connections: 32, connect: { ca } });
  const lister = new undici.Agent({ connections: 1, connect: { ca } });
  const probes = new undici.Agent({ connections: 2, connect: { ca } });
  const post = async (p, token, body) => {
    const r = await undici.request(`${adminUrl}${p}`, {
      method: 'POST',
      dispatcher: beats,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    });
    const text = await r.body.text();
    return { status: r.statusCode, text };
  };

  const nodes = [];
  for (let i = 0; i < NODES; i++) {
    const id = `flood-${String(i).padStart(3, '0')}`;
    const j = await post('/agent/v1/join', JOIN, JSON.stringify({ node_id: id }));
    if (j.status !== 200) throw new Error(`join ${id}: ${j.status} ${j.text}`);
    nodes.push({ id, credential: JSON.parse(j.text).credential, body: reportOf(id, BYTES), seq: 0 });
  }
  const statuses = new Map();
  const beat = async (n) => {
    const r = await post('/agent/v1/heartbeat', n.credential, n.body.replace('@SEQ@', String(10_000 + ++n.seq)));
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  };

  // /healthz on each listener, one at a time each, every 20 ms.
  const samples = { admin: [], client: [] };
  let phase = 'steady';
  let probing = true;
  const probe = async (name, url) => {
    while (probing) {
      const t = performance.now();
      const r = await undici.request(`${url}/healthz`, { dispatcher: probes });
      await r.body.text();
      samples[name].push({ phase, ms: performance.now() - t });
      await new Promise((res) => setTimeout(res, 20));
    }
  };
  // The noise floor, in the same run: an idle Node process answering the same probe.
  const idle = spawn(process.execPath, ['-e', IDLE_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const idleUrl = await new Promise((resolve) => idle.stdout.once('data', (d) => resolve(String(d).trim())));
  samples.idle = [];
  const probers = [probe('admin', adminUrl), probe('client', clientUrl), probe('idle', idleUrl)];

  // `ctl nodes`, back to back: every page of the list.
  const lists = [];
  let listing = true;
  const listAll = async () => {
    while (listing) {
      const t = performance.now();
      let after;
      let bytes = 0;
      let pages = 0;
      let count = 0;
      do {
        const r = await undici.request(`${adminUrl}/api/v1/nodes${after ? `?after=${encodeURIComponent(after)}` : ''}`, {
          dispatcher: lister,
          headers: { authorization: `Bearer ${ADMIN}` },
        });
        const text = await r.body.text();
        if (r.statusCode !== 200) throw new Error(`GET /api/v1/nodes: ${r.statusCode} ${text.slice(0, 200)}`);
        bytes += Buffer.byteLength(text);
        count += JSON.parse(text).length;
        pages++;
        after = r.headers['x-next-cursor'];
      } while (after);
      lists.push({ ms: performance.now() - t, bytes, pages, count });
    }
  };
  const reader = LIST ? listAll() : Promise.resolve();

  // (a) Steady: each node every 5 s, spread over the interval.
  const until = Date.now() + SECONDS * 1000;
  await Promise.all(
    nodes.map(async (n, i) => {
      await new Promise((r) => setTimeout(r, (i * BEAT_MS) / NODES));
      while (Date.now() < until) {
        const t = Date.now();
        await beat(n);
        await new Promise((r) => setTimeout(r, Math.max(0, BEAT_MS - (Date.now() - t))));
      }
    }),
  );
  // (b) A burst: every node at once, three times.
  phase = 'burst';
  for (let k = 0; k < 3; k++) await Promise.all(nodes.map(beat));
  phase = 'after';
  await new Promise((r) => setTimeout(r, 500));
  probing = false;
  listing = false;
  await Promise.all([...probers, reader]);
  idle.kill();
  if (process.env.BENCH_SERVER_NODE_ARGS?.includes('--trace-gc')) {
    const pauses = [...server.output().matchAll(/(Mark-Compact|Scavenge)[^,]*, ([\d.]+) \/ [\d.]+ ms/g)].map((x) => [x[1], Number(x[2])]);
    const worst = (k) => Math.max(0, ...pauses.filter((p) => p[0] === k).map((p) => p[1]));
    console.log(`GC: ${pauses.length} pauses; longest Mark-Compact ${worst('Mark-Compact')} ms, longest Scavenge ${worst('Scavenge')} ms`);
  }

  const over = await post('/agent/v1/heartbeat', nodes[0].credential, reportOf(nodes[0].id, BYTES + 1).replace('@SEQ@', '10000'));
  // What the database holds (its pages), read beside the server; the file follows at the next checkpoint.
  const Database = createRequire(path.join(root, 'packages/server/package.json'))('better-sqlite3');
  const fileBytes = () => {
    const db = new Database(path.join(dataDir, 'llmgw.db'), { readonly: true });
    const n = db.pragma('page_count', { simple: true }) * db.pragma('page_size', { simple: true });
    db.close();
    return n;
  };
  await new Promise((r) => setTimeout(r, 600)); // the last batch of reports written
  const before = fileBytes();
  for (const n of nodes) {
    const r = await undici.request(`${adminUrl}/api/v1/nodes/${n.id}`, { method: 'DELETE', dispatcher: lister, headers: { authorization: `Bearer ${ADMIN}` } });
    await r.body.text();
  }
  const after = fileBytes();

  const row = (name, ph) => {
    const xs = samples[name]
      .filter((s) => s.phase === ph)
      .map((s) => s.ms)
      .sort((a, b) => a - b);
    return [
      `${name === 'idle' ? 'an idle process (noise floor)' : `${name} /healthz`}, ${ph}`,
      String(xs.length),
      percentile(xs, 50).toFixed(1),
      percentile(xs, 99).toFixed(1),
      xs[xs.length - 1].toFixed(1),
    ];
  };
  const l = lists.map((x) => x.ms).sort((a, b) => a - b);
  const MB = (b) => (b / 1e6).toFixed(1);
  console.log(
    `\nreport flood: ${NODES} nodes, reports of ${BYTES} bytes (${(BYTES / 1024).toFixed(0)} KiB), ${SECONDS} s steady at one beat per node per 5 s, then 3 bursts of all at once`,
  );
  console.log(
    `server: ${TREE === root ? 'this checkout' : TREE}; load average at the end ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} on ${os.cpus().length} cores\n`,
  );
  console.log(
    table(
      ['probe', 'samples', 'p50 ms', 'p99 ms', 'max ms'],
      [row('admin', 'steady'), row('client', 'steady'), row('idle', 'steady'), row('admin', 'burst'), row('client', 'burst'), row('idle', 'burst')],
    ),
  );
  console.log(`\nheartbeats answered: ${[...statuses].map(([s, c]) => `${c} x ${s}`).join(', ')}; one report a byte over the cap: ${over.status}`);
  if (l.length) {
    const last = lists[lists.length - 1];
    console.log(
      `full node list (every page), ${l.length} times: median ${percentile(l, 50).toFixed(0)} ms, max ${l[l.length - 1].toFixed(0)} ms; ${last.count} nodes in ${last.pages} pages, ${MB(last.bytes)} MB`,
    );
  }
  console.log(`store (llmgw.db, its pages): ${MB(before)} MB with ${NODES} nodes, ${MB(after)} MB after deleting them all`);
  const worst = Math.max(...samples.admin.map((s) => s.ms), ...samples.client.map((s) => s.ms));
  console.log(`\nGoal: /healthz under 200 ms on both listeners throughout: ${worst < 200 ? 'met' : 'NOT met'} (worst ${worst.toFixed(0)} ms).`);
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 500);
}
