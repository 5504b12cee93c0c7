// LoRA adapter routing (issue 31), adapter affinity vs least-loaded, in one run: a real
// server and agent serve the test engine twice, as two models that differ only in how
// they route by adapter (`adapter_routing: affinity`, the default, with the default
// cache-aware policy; `adapter_routing: none` with `routing: least-loaded`), each with 32
// adapters on 4 replicas of 4 adapter slots. Each workload is sent to both at the same
// time, the same adapters at the same offsets (a seeded PRNG), Poisson arrivals with the
// adapter drawn from Zipf(s) over the 32.
//
// The engine simulates an adapter load (`--lora-load-ms`, default 100 ms here, about a
// rank-16 adapter of a 7-8B model from host memory to the GPU) before a request for an
// adapter not in a slot, and evicts the least recently used when its 4 slots are full.
// Table: adapter loads per 1,000 requests (the gateway's llmgw_adapter_loads_total, with
// the engines' own count beside it) and TTFT p50/p90.
//
// Lower bound for reference: with 16 slots for 32 adapters, even a clairvoyant placement
// of the 16 most asked for loads one adapter per request for the other 16 (printed as
// "bound"). `--quick` runs each workload for a few seconds, as a smoke run;
// `--load-ms=N` sets the simulated load time.
import { Pool, adminText, fleet, stopAll, table } from './lib.mjs';
import { poisson, rng, streamChat } from './routing-workloads.mjs';

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 5 : 25;
const RATE = 40;
const ADAPTERS = 32;
const REPLICAS = 4;
const SLOTS = 4;
const LOAD_MS = Number(process.argv.find((a) => a.startsWith('--load-ms='))?.slice('--load-ms='.length) ?? 100);
const EXPONENTS = [1.1, 2];
const POLICIES = [
  { name: 'adapter affinity', model: 'lora-affinity', prefix: 'a', extra: '' },
  { name: 'least-loaded', model: 'lora-ll', prefix: 'b', extra: '    routing: least-loaded\n    adapter_routing: none\n' },
];

const engine = `[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}", --lora, "{adapters}", --max-loras, "{max_loaded_adapters}", --lora-load-ms, "${LOAD_MS}", --token-delay-ms, "4", --prefix-cache-tokens, "0"]`;
const catalog =
  'models:\n' +
  POLICIES.map(
    (p) =>
      `  - name: ${p.model}\n    source: t\n    scaling: { min: ${REPLICAS}, max: ${REPLICAS} }\n${p.extra}    adapters:\n` +
      Array.from({ length: ADAPTERS }, (_, i) => `      - { name: ${p.prefix}${i}, source: /adapters/${p.prefix}${i}.gguf }\n`).join('') +
      `    profiles:\n      - { name: cpu, engine: command, max_loaded_adapters: ${SLOTS}, command: ${engine} }\n`,
  ).join('');

/** Zipf(s) over `n`: the cumulative shares, and the share of the ranks past `held` (the bound). */
function zipf(n, s, held) {
  const w = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** s);
  const sum = w.reduce((a, b) => a + b, 0);
  let c = 0;
  return { cdf: w.map((x) => (c += x / sum)), tail: w.slice(held).reduce((a, b) => a + b, 0) / sum };
}

/** Poisson arrivals, each with an adapter index drawn from `cdf`: [offset ms, index]. */
function schedule(seed, cdf) {
  const random = rng(seed);
  return poisson(random, RATE, SECONDS).map((at) => {
    const u = random();
    const i = cdf.findIndex((x) => u <= x);
    return [at, i < 0 ? cdf.length - 1 : i];
  });
}

/** Sum of a counter's samples whose line includes `match`, from Prometheus text. */
function total(text, name, match) {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) && line.includes(match)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

const ms = (v) => (Number.isFinite(v) ? v.toFixed(0) : '-');

try {
  const t0 = Date.now();
  const f = await fleet(catalog, { replicas: REPLICAS * POLICIES.length });
  const pool = new Pool(f.clientUrl, { connections: 256 });
  console.log(`fleet ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const gatewayLoads = async (model) => total(await adminText(f.adminUrl, '/metrics'), 'llmgw_adapter_loads_total', `model="${model}"`);
  const engineLoads = async (model) => {
    let sum = 0;
    for (const r of f.replicas.filter((x) => x.model === model)) {
      sum += total(await (await fetch(`${r.endpoint}/metrics`)).text(), 'llmgw_test_engine_adapter_loads_total', '');
    }
    return sum;
  };

  const rows = [];
  const checks = [];
  for (const [w, s] of EXPONENTS.entries()) {
    const { cdf, tail } = zipf(ADAPTERS, s, REPLICAS * SLOTS);
    const plan = schedule(100 + w, cdf);
    const before = await Promise.all(POLICIES.map(async (p) => [await gatewayLoads(p.model), await engineLoads(p.model)]));
    const runs = await Promise.all(
      POLICIES.map(async (p) => {
        const start = performance.now();
        const results = await Promise.all(
          plan.map(async ([at, i]) => {
            const wait = at - (performance.now() - start);
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
            const adapter = `${p.prefix}${i}`;
            const r = await streamChat(pool, f.secret, adapter, [{ role: 'user', content: `hello ${i}` }], 4);
            return r.ok && !r.reply.startsWith(`echo(${adapter}):`) ? { ok: false, error: `reply not from ${adapter}: ${r.reply}` } : r;
          }),
        );
        return results;
      }),
    );
    const after = await Promise.all(POLICIES.map(async (p) => [await gatewayLoads(p.model), await engineLoads(p.model)]));
    const per1000 = [];
    for (const [k, p] of POLICIES.entries()) {
      const results = runs[k];
      const ok = results.filter((r) => r.ok);
      const ttft = ok.map((r) => r.ttft).sort((a, b) => a - b);
      const pct = (q) => (ttft.length === 0 ? NaN : ttft[Math.min(ttft.length - 1, Math.floor((q / 100) * ttft.length))]);
      const gw = ((after[k][0] - before[k][0]) * 1000) / results.length;
      const en = ((after[k][1] - before[k][1]) * 1000) / results.length;
      per1000.push(gw);
      const errors = results.length - ok.length;
      rows.push([
        `Zipf s=${s}`,
        p.name,
        results.length,
        gw.toFixed(1),
        en.toFixed(1),
        ms(pct(50)),
        ms(pct(90)),
        errors === 0 ? '0' : `${errors} (${results.find((r) => !r.ok)?.error})`,
      ]);
    }
    checks.push(
      `Zipf s=${s}: loads per 1,000 affinity / least-loaded = ${(per1000[0] / per1000[1]).toFixed(2)} (goal <= 0.5); bound for ${REPLICAS * SLOTS} slots: ${(tail * 1000).toFixed(1)}`,
    );
  }

  console.log(
    `\nLoRA adapter routing side by side (one run, same requests to both; ${ADAPTERS} adapters, ${REPLICAS} replicas x ${SLOTS} slots, ${RATE} requests/s for ${SECONDS} s per workload, ${LOAD_MS} ms simulated adapter load)\n`,
  );
  console.log(table(['workload', 'routing', 'requests', 'loads/1000 (gateway)', 'loads/1000 (engines)', 'TTFT p50 ms', 'TTFT p90 ms', 'errors'], rows));
  console.log(`\n${checks.join('\n')}`);
  await pool.close();
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 1500);
}
