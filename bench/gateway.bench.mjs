// Gateway overhead: the same requests against an engine directly and through the
// gateway, side by side in one run (machines here are noisy, so only same-run ratios
// mean anything), with a minimal Node proxy (minimal-proxy.mjs) as the baseline for
// what any Node proxy costs on this machine. The gateway and the baseline proxy are
// pinned to core 0 when taskset exists; the engine and this load generator share
// core 1.
import path from 'node:path';
import { Pool, cpuSeconds, fleet, percentile, root, run, stopAll, table, waitFor } from './lib.mjs';
import { measure, sequential } from './gateway-load.mjs';

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';
// The same engine under both routing policies, for the long-prompt case (one replica each).
const model = (name, routing) =>
  `  - name: ${name}\n    source: t\n    routing: ${routing}\n    profiles:\n      - { name: cpu, engine: command, command: ${engine} }\n`;
const catalog = `models:\n${model('echo', 'least-loaded')}${model('echo-ca', 'cache-aware')}`;

// ~8,000 tokens (32,000 characters) of shared system prompt and a question of its own per request.
const longSystem = 'You are a meticulous assistant; answer with care and cite the manual. '.repeat(460);
const longBody = (name) => (i) =>
  JSON.stringify({
    model: name,
    max_tokens: 4,
    messages: [
      { role: 'system', content: longSystem },
      { role: 'user', content: `question ${i}` },
    ],
  });

/**
 * Added latency of 8,000-token prompts at c=1, least-loaded vs cache-aware (hashing the
 * prompt, the index lookup and learning). Each model has its own replica, so each is
 * compared with its own engine direct; requests alternate one by one, so that drift on
 * a noisy machine hits both policies alike.
 */
async function longPrompts(gateway, key, direct) {
  const lat = { 'least-loaded': { direct: [], gateway: [] }, 'cache-aware': { direct: [], gateway: [] } };
  const one = async (pool, k, name, i) => (await sequential(pool, k, 1, () => longBody(name)(i)))[0];
  for (let i = 0; i < 1500; i++) {
    for (const [policy, name] of [
      ['least-loaded', 'echo'],
      ['cache-aware', 'echo-ca'],
    ]) {
      const d = await one(direct[name].pool, direct[name].key, name, i);
      const g = await one(gateway, key, name, i);
      if (i < 200) continue; // warm-up
      lat[policy].direct.push(d);
      lat[policy].gateway.push(g);
    }
  }
  for (const p of Object.values(lat)) for (const a of Object.values(p)) a.sort((x, y) => x - y);
  return lat;
}

/**
 * The gateway's own CPU per long-prompt request under each policy: blocks of requests
 * through the gateway alone, alternating policies, the server's user+system time read
 * from /proc around each block. CPU on the gateway's single thread is what a policy
 * adds to every request's path, and it is steadier here than latency differences.
 */
async function longPromptCpu(gateway, key, pid, blocks = 6, perBlock = 600) {
  const cpu = { 'least-loaded': 0, 'cache-aware': 0 };
  const n = { 'least-loaded': 0, 'cache-aware': 0 };
  for (let b = 0; b < blocks; b++) {
    for (const [policy, name] of b % 2
      ? [
          ['least-loaded', 'echo'],
          ['cache-aware', 'echo-ca'],
        ]
      : [
          ['cache-aware', 'echo-ca'],
          ['least-loaded', 'echo'],
        ]) {
      const c0 = cpuSeconds(pid);
      await sequential(gateway, key, perBlock, (i) => longBody(name)(b * perBlock + i));
      cpu[policy] += cpuSeconds(pid) - c0;
      n[policy] += perBlock;
    }
  }
  return { 'least-loaded': (cpu['least-loaded'] / n['least-loaded']) * 1e6, 'cache-aware': (cpu['cache-aware'] / n['cache-aware']) * 1e6 };
}

/**
 * Added c=1 latency below saturation, in one run: rounds of `n` requests each through
 * the engine direct, the minimal proxy and the gateway (its flow control on the path:
 * every request asks whether to hold), in an order that turns every round, so drift on a
 * noisy machine hits all three alike. Each round's p50 and p90 are taken over its own
 * direct run; the table gives the median over rounds, and the spread of the minimal
 * proxy's figure over rounds is the noise to read the gateway's against.
 */
async function interleaved(pools, keys, rounds, n = 400) {
  const sides = ['direct', 'minimal proxy', 'llmgw gateway'];
  const per = sides.map(() => ({ p50: [], p90: [] }));
  for (let i = 0; i < sides.length; i++) await sequential(pools[i], keys[i], 200); // warm-up, not counted
  for (let r = 0; r < rounds; r++) {
    const lat = [];
    for (let k = 0; k < sides.length; k++) {
      const i = (k + r) % sides.length;
      lat[i] = await sequential(pools[i], keys[i], n);
    }
    for (let i = 1; i < sides.length; i++) {
      per[i].p50.push(percentile(lat[i], 50) - percentile(lat[0], 50));
      per[i].p90.push(percentile(lat[i], 90) - percentile(lat[0], 90));
    }
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
  const us = (v) => `${(v * 1000).toFixed(0)}`;
  const spread = (xs) => `${us(Math.min(...xs))}..${us(Math.max(...xs))}`;
  const rows = ['p50', 'p90'].map((q) => [
    `c=1 ${q} added over direct (µs)`,
    `${us(median(per[1][q]))} (rounds ${spread(per[1][q])})`,
    `${us(median(per[2][q]))} (rounds ${spread(per[2][q])})`,
    us(median(per[2][q].map((g, j) => g - per[1][q][j]))),
  ]);
  console.log(`\nAdded latency below saturation, ${rounds} interleaved rounds of ${n} requests per side (median over rounds; range over rounds in brackets)\n`);
  console.log(table(['measure', 'minimal proxy', 'llmgw gateway (flow control on the path)', 'gateway minus proxy, per round (median)'], rows));
}

/** The small-request figures: latency, throughput and SSE, direct vs minimal proxy vs gateway. */
async function smallRequests(pools, r, f, proxy) {
  const d = await measure('engine direct', pools[0], r.api_key);
  const m = await measure('minimal proxy', pools[1], 'unused', proxy.child.pid);
  const g = await measure('llmgw gateway', pools[2], f.secret, f.serverPid);
  const p = (a, q) => percentile(a, q).toFixed(3);
  const add = (x, q) => `+${(percentile(x.lat, q) - percentile(d.lat, q)).toFixed(3)}`;
  const rows = [
    ['c=1 latency p50 (ms)', p(d.lat, 50), `${p(m.lat, 50)} (${add(m, 50)})`, `${p(g.lat, 50)} (${add(g, 50)})`],
    ['c=1 latency p99 (ms)', p(d.lat, 99), `${p(m.lat, 99)} (${add(m, 99)})`, `${p(g.lat, 99)} (${add(g, 99)})`],
    [
      'c=64 requests/s (ratio to direct)',
      d.thr.toFixed(0),
      `${m.thr.toFixed(0)} (${(m.thr / d.thr).toFixed(2)})`,
      `${g.thr.toFixed(0)} (${(g.thr / d.thr).toFixed(2)})`,
    ],
    ['requests per proxy CPU-second', '-', m.perCpu.toFixed(0), g.perCpu.toFixed(0)],
    ['SSE events/s, 16 streams', d.events.toFixed(0), m.events.toFixed(0), g.events.toFixed(0)],
    ['SSE events per proxy CPU-second', '-', m.eventsPerCpu.toFixed(0), g.eventsPerCpu.toFixed(0)],
  ];
  console.log('\nGateway vs a minimal proxy vs the engine direct (test engine, small chat completions; one run)\n');
  console.log(table(['measure', 'direct', 'minimal proxy', 'llmgw gateway'], rows));
  console.log(
    `\ngateway cost relative to the minimal proxy: ${(m.perCpu / g.perCpu).toFixed(2)}x CPU per request, ${(m.eventsPerCpu / g.eventsPerCpu).toFixed(2)}x CPU per SSE event`,
  );
  console.log('Goals: added p50 <= 0.3 ms at c=1; >= 5,000 small requests/s per core; >= 20,000 SSE events/s per core.');
}

try {
  const f = await fleet(catalog, { core: 0, replicas: 2 });
  const r = f.replicas.find((x) => x.model === 'echo');
  const proxy = run(path.join(root, 'bench/minimal-proxy.mjs'), [r.endpoint, r.api_key], { core: 0 });
  const proxyUrl = (await waitFor(async () => proxy.output().match(/on (http:\S+)/), 'minimal proxy'))[1];
  const pools = [new Pool(r.endpoint, { connections: 128 }), new Pool(proxyUrl, { connections: 128 }), new Pool(f.clientUrl, { connections: 128 })];
  // --routing-only: just the long-prompt routing case.
  if (!process.argv.includes('--routing-only')) {
    await smallRequests(pools, r, f, proxy);
    await interleaved(pools, [r.api_key, 'unused', f.secret], Number(process.argv.find((x) => x.startsWith('--rounds='))?.slice(9) ?? 8));
  }
  // --latency-only: the small-request figures and the interleaved rounds, not the routing case.
  if (!process.argv.includes('--latency-only')) await routingCase(pools, f, r);
  await Promise.all(pools.map((x) => x.close()));
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 1500);
}

/** 8,000-token prompts through each routing policy, against its own replica direct; then the server's CPU per such request. */
async function routingCase(pools, f, r) {
  const ca = f.replicas.find((x) => x.model === 'echo-ca');
  const caPool = new Pool(ca.endpoint, { connections: 4 });
  const long = await longPrompts(pools[2], f.secret, { echo: { pool: pools[0], key: r.api_key }, 'echo-ca': { pool: caPool, key: ca.api_key } });
  await caPool.close();
  const added = (p, q) => percentile(long[p].gateway, q) - percentile(long[p].direct, q);
  console.log('\n8,000-token prompts at c=1, each routing policy against its own replica direct (ms; added over direct in brackets)\n');
  console.log(
    table(
      ['measure', 'least-loaded', 'cache-aware'],
      [50, 90].map((q) => [
        `latency p${q}`,
        ...['least-loaded', 'cache-aware'].map((p) => `${percentile(long[p].gateway, q).toFixed(3)} (+${added(p, q).toFixed(3)})`),
      ]),
    ),
  );
  const us = (q) => ((added('cache-aware', q) - added('least-loaded', q)) * 1000).toFixed(0);
  console.log(`cache-aware added minus least-loaded added: p50 ${us(50)} µs, p90 ${us(90)} µs. Goal: within 50 µs.`);
  const cpu = await longPromptCpu(pools[2], f.secret, f.serverPid);
  console.log(
    `server CPU per 8,000-token request: least-loaded ${cpu['least-loaded'].toFixed(0)} µs, cache-aware ${cpu['cache-aware'].toFixed(0)} µs (difference ${(cpu['cache-aware'] - cpu['least-loaded']).toFixed(0)} µs; the server's heartbeats and reconcile ticks are in both)`,
  );
}
