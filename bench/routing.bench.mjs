// Cache-aware vs least-loaded routing, in one run: a real server and agent serve the
// same engine twice, as two models differing only in `routing:`, and each workload is
// sent to both at the same time, the same requests at the same offsets (a seeded PRNG),
// so both policies see the same machine noise.
//
// Engines: four replicas per policy of the test engine with its simulated prefix cache
// (the stand-in for a GPU engine: an LRU of block hashes, one prefill at a time at a set
// rate, so TTFT = queue wait + uncached tokens / rate), then two replicas per policy of
// the built-in engine on the generated test GGUF (real llama.cpp KV reuse).
//
// Workloads: (a) 16 groups sharing a 2,000-token system prompt, short questions, Poisson
// arrivals; (b) multi-turn chats, each turn appending to its conversation; (c) no reuse.
// Sizing: a replica's cache holds 16,000 tokens (8 of the 16 system prompts, or 6 or so
// of the 24 chats), four hold 64,000 (all of them, with room for an uneven split); a miss
// on a 2,000-token prompt takes 200 ms of prefill at 10,000 tokens/s, and 24 requests/s
// keep least-loaded's replicas busy (about 50-60 % prefill utilisation) but not
// saturated. Chats have 16 turns, so a new chat's cold first turn is rare (1 in 16). The
// first seconds of each workload fill the caches and are left out of the table.
//
// Until the catalog has `routing:` (the router's branch), both models run least-loaded
// and the table says so. `--quick` runs each workload for a few seconds, as a smoke run.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pool, fleet, root, stopAll, table, tmp } from './lib.mjs';
import { multiTurn, noReuse, openLoop, sharedPrefixes, summarise } from './routing-workloads.mjs';

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 4 : 18;
const LLAMA_SECONDS = quick ? 3 : 10;
/** Requests sent in the first seconds fill the caches; the table is the steady state after. */
const WARMUP_MS = quick ? 1000 : 4000;

// The catalog schema as built: it has `routing` once the router's branch is in.
const { ModelSchema } = await import(pathToFileURL(path.join(root, 'packages/shared/dist/index.js')).href);
const routingField = ModelSchema.properties.routing !== undefined;
const POLICIES = ['cache-aware', 'least-loaded'];

/** Simulated engine: 16,000-token cache, 10,000 prompt tokens/s, 4 ms per output token. */
const SIM_ARGS = ['--prefix-cache-tokens', '16000', '--prefill-tokens-per-s', '10000', '--cache-block-tokens', '16', '--token-delay-ms', '4'];
const sim = `[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}", ${SIM_ARGS.map((a) => `"${a}"`).join(', ')}]`;

const dir = tmp('llmgw-routing-bench-');
const gguf = path.join(dir, 'tiny.gguf');
execFileSync(process.execPath, [path.join(root, 'packages/agent/dist/main.js'), 'make-test-model', '--out', gguf]);

const model = (name, policy, replicas, profile) =>
  `  - name: ${name}\n    source: ${name.startsWith('tiny') ? gguf : 't'}\n${routingField ? `    routing: ${policy}\n` : ''}    scaling: { min: ${replicas}, max: ${replicas} }\n    profiles:\n      - ${profile}\n`;
const catalog =
  'models:\n' +
  POLICIES.map((p) => model(`sim-${p}`, p, 4, `{ name: cpu, engine: command, command: ${sim} }`)).join('') +
  // One thread each: the engines share this machine's cores with everything else.
  POLICIES.map((p) => model(`tiny-${p}`, p, 2, '{ name: cpu, engine: node-llama-cpp, args: ["--parallel", "2", "--threads", "1"] }')).join('');

/** Runs `work(model)` for both policies at once; returns the summaries by policy. */
async function both(work, prefix, warmupMs = WARMUP_MS) {
  const runs = await Promise.all(POLICIES.map((p) => work(`${prefix}-${p}`)));
  return Object.fromEntries(POLICIES.map((p, i) => [p, summarise(runs[i], warmupMs)]));
}

const rows = [];
const checks = [];
const ms = (v) => (Number.isFinite(v) ? v.toFixed(0) : '-');
function report(name, s) {
  for (const p of POLICIES) {
    const r = s[p];
    const label = routingField || p === 'least-loaded' ? p : 'cache-aware (not in this build: least-loaded)';
    rows.push([
      name,
      label,
      r.n,
      ms(r.p50),
      ms(r.p90),
      `${(r.cachedShare * 100).toFixed(1)} %`,
      r.rps.toFixed(1),
      r.promptTps.toFixed(0),
      r.errors === 0 ? '0' : `${r.errors} (${r.firstError})`,
    ]);
  }
}
const ratio = (s, f) => f(s['cache-aware']) / f(s['least-loaded']);

try {
  const t0 = Date.now();
  const f = await fleet(catalog, { replicas: 12 });
  const pool = new Pool(f.clientUrl, { connections: 256 });
  console.log(
    `fleet ready in ${((Date.now() - t0) / 1000).toFixed(1)} s; routing field in the catalog: ${routingField ? 'yes' : 'no (both models least-loaded)'}`,
  );

  // Warm-up, not counted: one request per model, so connections and processes are up.
  await both((m) => openLoop(pool, f.secret, m, [[0, [{ role: 'user', content: 'hello' }]]], 2), 'sim', 0);

  const a = await both(
    (m) => openLoop(pool, f.secret, m, sharedPrefixes({ seed: 1, groups: 16, systemWords: 2000, questionWords: 16, rate: 24, seconds: SECONDS }), 8),
    'sim',
  );
  report('(a) shared prefixes', a);
  checks.push(
    `(a) TTFT p90 cache-aware / least-loaded = ${ratio(a, (r) => r.p90).toFixed(2)} (goal <= 0.3); cached share ${(a['cache-aware'].cachedShare * 100).toFixed(1)} % (goal >= 85 %)`,
  );

  const b = await both(
    (m) =>
      multiTurn(pool, f.secret, m, {
        seed: 2,
        conversations: 24,
        systemWords: 400,
        questionWords: 60,
        turns: 16,
        thinkMs: 500,
        seconds: SECONDS,
        maxTokens: 24,
      }),
    'sim',
  );
  report('(b) multi-turn chats', b);
  checks.push(`(b) TTFT p90 cache-aware / least-loaded = ${ratio(b, (r) => r.p90).toFixed(2)} (goal <= 0.5)`);

  const c = await both((m) => openLoop(pool, f.secret, m, noReuse({ seed: 3, promptWords: 1000, rate: 24, seconds: SECONDS }), 8), 'sim');
  report('(c) no reuse', c);
  checks.push(
    `(c) cache-aware / least-loaded: TTFT p90 ${ratio(c, (r) => r.p90).toFixed(2)}, throughput ${ratio(c, (r) => r.rps).toFixed(2)} (goal: both within 10 %)`,
  );

  // Built-in engine: 4 groups of ~700-token system prompts (the test model's vocabulary
  // is letter-level), two slots per replica, so one replica cannot keep every group, two can.
  await both((m) => openLoop(pool, f.secret, m, [[0, [{ role: 'user', content: 'hello' }]]], 2), 'tiny', 0);
  const d = await both(
    (m) => openLoop(pool, f.secret, m, sharedPrefixes({ seed: 4, groups: 4, systemWords: 130, questionWords: 4, rate: 6, seconds: LLAMA_SECONDS }), 4),
    'tiny',
    WARMUP_MS / 2,
  );
  report('built-in engine, shared prefixes', d);

  console.log(`\nRouting policies side by side (one run, same requests to both; ${quick ? 'quick smoke run' : `${SECONDS} s per workload`})\n`);
  console.log(table(['workload', 'policy', 'requests', 'TTFT p50 ms', 'TTFT p90 ms', 'cached share', 'req/s', 'prompt tok/s', 'errors'], rows));
  console.log(`\n${checks.join('\n')}`);
  console.log(
    `Simulated engines: 4 replicas per policy, 16,000-token prefix cache each, 10,000 prompt tokens/s, one prefill at a time; requests sent in the first ${WARMUP_MS / 1000} s of each workload not counted.`,
  );
  await pool.close();
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 1500);
}
