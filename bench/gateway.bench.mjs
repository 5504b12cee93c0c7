// Gateway overhead: the same requests against an engine directly and through the
// gateway, side by side in one run (machines here are noisy, so only same-run ratios
// mean anything), with a minimal Node proxy (minimal-proxy.mjs) as the baseline for
// what any Node proxy costs on this machine. The gateway and the baseline proxy are
// pinned to core 0 when taskset exists; the engine and this load generator share
// core 1.
import path from 'node:path';
import { Pool, cpuSeconds, fleet, percentile, root, run, stopAll, table, waitFor } from './lib.mjs';

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';
const catalog = `models:\n  - name: echo\n    source: t\n    profiles:\n      - { name: cpu, engine: command, command: ${engine} }\n`;

const body = JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 });
const streamBody = JSON.stringify({ model: 'echo', stream: true, max_tokens: 400, min_tokens: 400, messages: [{ role: 'user', content: 'go' }] });

async function sequential(pool, key, n) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    const r = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    await r.body.text();
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return lat.sort((a, b) => a - b);
}

async function concurrent(pool, key, c, ms) {
  let done = 0;
  const end = Date.now() + ms;
  await Promise.all(Array.from({ length: c }, async () => {
    while (Date.now() < end) {
      const r = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
      await r.body.text();
      done++;
    }
  }));
  return done / (ms / 1000);
}

async function streams(pool, key, c, n) {
  let events = 0;
  await Promise.all(Array.from({ length: c }, async () => {
    for (let i = 0; i < n; i++) {
      const r = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: streamBody });
      for await (const chunk of r.body) events += (chunk.toString().match(/\n\n/g) ?? []).length;
    }
  }));
  return events;
}

async function measure(name, pool, key, pid) {
  await sequential(pool, key, 300);
  const lat = await sequential(pool, key, 2000);
  const c0 = pid ? cpuSeconds(pid) : 0;
  const thr = await concurrent(pool, key, 64, 4000);
  const cpu = pid ? cpuSeconds(pid) - c0 : NaN;
  const s0 = pid ? cpuSeconds(pid) : 0;
  const t0 = Date.now();
  const events = await streams(pool, key, 16, 5);
  const sCpu = pid ? cpuSeconds(pid) - s0 : NaN;
  return { name, lat, thr, perCpu: (thr * 4) / cpu, events: events / ((Date.now() - t0) / 1000), eventsPerCpu: events / sCpu };
}

try {
  const f = await fleet(catalog, { core: 0 });
  const r = f.replicas[0];
  const proxy = run(path.join(root, 'bench/minimal-proxy.mjs'), [r.endpoint, r.api_key], { core: 0 });
  const proxyUrl = (await waitFor(async () => proxy.output().match(/on (http:\S+)/), 'minimal proxy'))[1];
  const pools = [new Pool(r.endpoint, { connections: 128 }), new Pool(proxyUrl, { connections: 128 }), new Pool(f.clientUrl, { connections: 128 })];
  const d = await measure('engine direct', pools[0], r.api_key);
  const m = await measure('minimal proxy', pools[1], 'unused', proxy.child.pid);
  const g = await measure('llmgw gateway', pools[2], f.secret, f.serverPid);
  const p = (a, q) => percentile(a, q).toFixed(3);
  const add = (x, q) => `+${(percentile(x.lat, q) - percentile(d.lat, q)).toFixed(3)}`;
  const rows = [
    ['c=1 latency p50 (ms)', p(d.lat, 50), `${p(m.lat, 50)} (${add(m, 50)})`, `${p(g.lat, 50)} (${add(g, 50)})`],
    ['c=1 latency p99 (ms)', p(d.lat, 99), `${p(m.lat, 99)} (${add(m, 99)})`, `${p(g.lat, 99)} (${add(g, 99)})`],
    ['c=64 requests/s (ratio to direct)', d.thr.toFixed(0), `${m.thr.toFixed(0)} (${(m.thr / d.thr).toFixed(2)})`, `${g.thr.toFixed(0)} (${(g.thr / d.thr).toFixed(2)})`],
    ['requests per proxy CPU-second', '-', m.perCpu.toFixed(0), g.perCpu.toFixed(0)],
    ['SSE events/s, 16 streams', d.events.toFixed(0), m.events.toFixed(0), g.events.toFixed(0)],
    ['SSE events per proxy CPU-second', '-', m.eventsPerCpu.toFixed(0), g.eventsPerCpu.toFixed(0)],
  ];
  console.log('\nGateway vs a minimal proxy vs the engine direct (test engine, small chat completions; one run)\n');
  console.log(table(['measure', 'direct', 'minimal proxy', 'llmgw gateway'], rows));
  console.log(`\ngateway cost relative to the minimal proxy: ${(m.perCpu / g.perCpu).toFixed(2)}x CPU per request, ${(m.eventsPerCpu / g.eventsPerCpu).toFixed(2)}x CPU per SSE event`);
  console.log('Goals: added p50 <= 0.3 ms at c=1; >= 5,000 small requests/s per core; >= 20,000 SSE events/s per core.');
  await Promise.all(pools.map((x) => x.close()));
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 1500);
}
