// The gateway's per-request cost with its state on PostgreSQL vs SQLite, in one run: two
// fleets side by side (a server pinned to core 0 where taskset exists, an agent, the test
// engine), one on each store, and gateway.bench.mjs's small-request measures (gateway-load.mjs)
// run on each in turn, alternating, several rounds. No database is on a request's path
// (keys, limits and routing are in memory; usage is written in batches), so both must be
// within noise: the rounds of one store against each other show how large that is here.
// PostgreSQL runs with its durable defaults (fsync on). `--quick`: one short round each.
import { Pool, fleet, percentile, table, withPostgres } from './lib.mjs';
import { measure } from './gateway-load.mjs';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 3;
const SIZES = quick ? { warm: 100, n: 300, ms: 1000, streamsEach: 0 } : { warm: 200, n: 1500, ms: 3000, streamsEach: 0 };

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';
const catalog = `models:\n  - name: echo\n    source: t\n    profiles:\n      - { name: cpu, engine: command, command: ${engine} }\n`;

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0], med: percentile(s, 50), max: s[s.length - 1] };
};

await withPostgres(quick, async (cluster) => {
  const stores = [
    { kind: 'SQLite', f: await fleet(catalog, { core: 0 }) },
    { kind: 'PostgreSQL', f: await fleet(catalog, { core: 0, databaseUrl: cluster.url }) },
  ];
  for (const s of stores) {
    s.pool = new Pool(s.f.clientUrl, { connections: 128 });
    s.runs = [];
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 ? [...stores].reverse() : stores) s.runs.push(await measure(s.kind, s.pool, s.f.secret, s.f.serverPid, SIZES));
  }
  const measures = [
    ['c=1 latency p50 (ms)', (r) => percentile(r.lat, 50), 3],
    ['c=1 latency p99 (ms)', (r) => percentile(r.lat, 99), 3],
    ['c=64 requests/s', (r) => r.thr, 0],
    ['requests per server CPU-second', (r) => r.perCpu, 0],
    ...(SIZES.streamsEach ? [['SSE events per server CPU-second', (r) => r.eventsPerCpu, 0]] : []),
  ];
  const rows = measures.map(([name, f, digits]) => {
    const [a, b] = stores.map((s) => stats(s.runs.map(f)));
    const spread = (x) => `${(((x.max - x.min) / x.med) * 100).toFixed(0)} %`;
    return [
      name,
      `${a.min.toFixed(digits)} / ${a.med.toFixed(digits)}`,
      `${b.min.toFixed(digits)} / ${b.med.toFixed(digits)}`,
      (b.med / a.med).toFixed(3),
      `${spread(a)}, ${spread(b)}`,
    ];
  });
  console.log(
    `\nGateway on PostgreSQL vs SQLite: small chat completions through each, ${ROUNDS} alternating round(s) of ${SIZES.n} requests at c=1 and ${SIZES.ms / 1000} s at c=64 (min / median over rounds)\n`,
  );
  console.log(table(['measure', 'SQLite', 'PostgreSQL', 'ratio PG / SQLite (medians)', 'spread (max-min)/median: SQLite, PG'], rows));
  console.log("\nGoal: within noise, i.e. the ratio within the spread of each store's own rounds (no database on the request path).");
  await Promise.all(stores.map((s) => s.pool.close()));
});
