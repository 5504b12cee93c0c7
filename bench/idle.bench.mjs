// Issue 32, item 5: the server's idle cost. One real server (SQLite) with a catalog of
// 100 replicas (10 models of 10, CPU profiles) and 200 fake nodes (idle-agents.mjs, a
// process of its own) that join through the agent API, heartbeat every 5 s with a full
// report and their shards' states, and hold the assignments long-poll, as agents do.
// The agents report each assigned shard ready (no engines run; the server probes no
// engine of a node that reports). Once all 100 replicas are ready and a warm-up has
// passed, the server's CPU time (utime + stime in /proc/PID/stat) and resident memory
// (VmRSS in /proc/PID/status) are read every minute. Goals: CPU <= 2 % of one core over
// the window, RSS within +-5 % of its value after the warm-up throughout.
//
// Baselines, in the same run and the same window: (1) the least any Node HTTPS server
// spends on the same traffic (idle-minimal.mjs: the same agent API paths over TLS, a
// second fleet of the same 200 fake agents, nothing behind them): what the protocol
// costs before llmgw does anything; (2) the same server with the same flags, an empty
// catalog and no nodes: the idle floor of a server with nothing to do.
// Both servers run at the production default `--reconcile-interval 5`.
//
//   node bench/idle.bench.mjs [--minutes=30] [--warmup=2] [--quick]   (--quick: 2 min, 30 s warm-up)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JOIN, admin, cpuSeconds, root, run, serverTrust, startServer, stopAll, table, tmp, waitFor } from './lib.mjs';

const arg = (name, dflt) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
const quick = process.argv.includes('--quick');
const MINUTES = arg('minutes', quick ? 2 : 30);
const WARMUP_S = arg('warmup', quick ? 0.5 : 2) * 60;
const NODES = 200;
const MODELS = 10;
const PER_MODEL = 10;
const CPU_GOAL = 2;
const RSS_GOAL = 5;

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';
const model = (i) =>
  `  - name: idle-${i}\n    source: t\n    scaling: { min: ${PER_MODEL}, max: ${PER_MODEL} }\n    profiles:\n      - { name: cpu, engine: command, min_memory_gb: 20, command: ${engine} }\n`;
const catalogs = { fleet: `models:\n${Array.from({ length: MODELS }, (_, i) => model(i)).join('')}`, empty: 'models: []\n' };

const rssMb = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)[1]) / 1024;

async function server(kind) {
  const dir = tmp(`llmgw-idle-${kind}-`);
  fs.writeFileSync(path.join(dir, 'catalog.yaml'), catalogs[kind]);
  // Joins are rate-limited (60 a minute by default): raised so that the fleet joins at once.
  return startServer({
    dir,
    catalog: path.join(dir, 'catalog.yaml'),
    env: { LLMGW_JOIN_RATE: String(NODES * 2) },
    extraArgs: ['--reconcile-interval', '5'],
  });
}

let failed = false;
try {
  const [fleet, floor] = [await server('fleet'), await server('empty')];
  const { caFile } = serverTrust(fleet.dataDir, fleet.adminUrl);
  serverTrust(floor.dataDir, floor.adminUrl);
  const agents = run(path.join(root, 'bench/idle-agents.mjs'), [fleet.adminUrl, caFile, JOIN, String(NODES)]);
  const minimal = run(path.join(root, 'bench/idle-minimal.mjs'), [fleet.dataDir], {
    // The servers' node flags (`--cpu-prof`, say) for the baseline too, so that their profiles compare.
    nodeArgs: (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean),
  });
  const minimalUrl = await waitFor(async () => minimal.output().match(/https:\S+/)?.[0], 'the minimal server');
  const minimalAgents = run(path.join(root, 'bench/idle-agents.mjs'), [minimalUrl, caFile, JOIN, String(NODES)]);
  await waitFor(async () => agents.output().includes(`joined ${NODES}`) && minimalAgents.output().includes(`joined ${NODES}`), 'the fleets to join', 120_000);
  const t0 = Date.now();
  await waitFor(
    async () => {
      const rs = await admin(fleet.adminUrl, '/replicas');
      return rs.length === MODELS * PER_MODEL && rs.every((r) => r.state === 'ready');
    },
    `${MODELS * PER_MODEL} ready replicas`,
    300_000,
  );
  console.log(
    `idle cost: ${NODES} nodes heartbeating every 5 s, ${MODELS * PER_MODEL} replicas ready after ${((Date.now() - t0) / 1000).toFixed(0)} s; warm-up ${WARMUP_S} s, then ${MINUTES} min measured`,
  );
  await new Promise((r) => setTimeout(r, WARMUP_S * 1000));

  const servers = { fleet, minimal: { pid: minimal.child.pid }, floor };
  const sample = () => Object.fromEntries(Object.entries(servers).map(([k, s]) => [k, { cpu: cpuSeconds(s.pid), rss: rssMb(s.pid), at: Date.now() }]));
  const samples = [sample()];
  const rows = [];
  for (let m = 1; m <= MINUTES; m++) {
    await new Promise((r) => setTimeout(r, 60_000));
    const [a, b] = [samples[samples.length - 1], sample()];
    samples.push(b);
    const pct = (k) => ((100 * (b[k].cpu - a[k].cpu)) / ((b[k].at - a[k].at) / 1000)).toFixed(2);
    const row = [String(m), pct('fleet'), b.fleet.rss.toFixed(1), pct('minimal'), pct('floor'), b.floor.rss.toFixed(1), os.loadavg()[0].toFixed(1)];
    rows.push(row);
    console.log(`minute ${row[0]}: fleet ${row[1]} % CPU, ${row[2]} MB; minimal HTTPS ${row[3]} %; floor ${row[4]} %, ${row[5]} MB; load ${row[6]}`);
    for (const a of [agents, minimalAgents, minimal]) if (a.child.exitCode !== null) throw new Error(`a helper exited:\n${a.output().slice(-2000)}`);
  }
  const [first, last] = [samples[0], samples[samples.length - 1]];
  const summary = (k) => {
    const cpu = (100 * (last[k].cpu - first[k].cpu)) / ((last[k].at - first[k].at) / 1000);
    const dev = Math.max(...samples.map((s) => Math.abs(s[k].rss - first[k].rss) / first[k].rss)) * 100;
    return { cpu, dev, from: first[k].rss, to: last[k].rss };
  };
  const [f, mn, b] = [summary('fleet'), summary('minimal'), summary('floor')];
  console.log(`\nserver's CPU (% of one core) and RSS per minute after the warm-up, ${os.cpus().length} cores:\n`);
  console.log(table(['minute', 'fleet CPU %', 'fleet RSS MB', 'minimal HTTPS CPU %', 'floor CPU %', 'floor RSS MB', 'load avg'], rows));
  const beats = (a) =>
    (
      a
        .output()
        .match(/beats (\d+) (\d+)/g)
        ?.pop() ?? 'beats ? ?'
    ).split(' ');
  const [[, ok, bad], [, ok2, bad2]] = [beats(agents), beats(minimalAgents)];
  console.log(`\nfake agents (at their last count): fleet ${ok} heartbeats answered 200, ${bad} failed; minimal HTTPS ${ok2} and ${bad2}`);
  console.log(
    table(
      ['server', 'CPU % over the window', 'RSS MB first -> last', 'max RSS deviation'],
      [
        [
          `fleet (${NODES} nodes, ${MODELS * PER_MODEL} ready replicas)`,
          f.cpu.toFixed(2),
          `${f.from.toFixed(1)} -> ${f.to.toFixed(1)}`,
          `${f.dev.toFixed(1)} %`,
        ],
        ['minimal HTTPS (same traffic, nothing behind; baseline)', mn.cpu.toFixed(2), `${mn.from.toFixed(1)} -> ${mn.to.toFixed(1)}`, `${mn.dev.toFixed(1)} %`],
        ['floor (empty catalog, no nodes; baseline)', b.cpu.toFixed(2), `${b.from.toFixed(1)} -> ${b.to.toFixed(1)}`, `${b.dev.toFixed(1)} %`],
      ],
    ),
  );
  console.log(
    `\nGoal: CPU <= ${CPU_GOAL} % of a core: ${f.cpu <= CPU_GOAL ? 'met' : 'NOT met'} (${f.cpu.toFixed(2)} %; minimal HTTPS on the same traffic ${mn.cpu.toFixed(2)} %, the floor ${b.cpu.toFixed(2)} %)`,
  );
  console.log(`Goal: RSS flat within +-${RSS_GOAL} %: ${f.dev <= RSS_GOAL ? 'met' : 'NOT met'} (max deviation ${f.dev.toFixed(1)} % over ${MINUTES} min)`);
} catch (err) {
  failed = true;
  console.error(err);
} finally {
  stopAll();
  setTimeout(() => process.exit(failed ? 1 : 0), 500);
}
