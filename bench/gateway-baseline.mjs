// The gateway against an earlier build of llmgw, in one run: both servers up at once,
// each with its own agent, on the same test engine, measured in alternating
// rounds on the same load, the baseline twice a round so that the machine's noise shows
// beside every ratio. Both servers are pinned to core 0 when taskset exists, as in
// gateway.bench.mjs; only one side is under load at a time.
//
//   node bench/gateway-baseline.mjs --baseline=DIR [--tree=DIR] [--rounds=N] [--routing=POLICY]
//   LLMGW_BENCH_BASELINE=DIR pnpm bench     (the same, as part of every benchmark)
//
// --baseline is a built checkout of the revision to compare with, made once:
//   git worktree add --detach /tmp/llmgw-base REV && (cd /tmp/llmgw-base && pnpm install && pnpm build)
// --tree (default: this checkout, built) is the other side, to compare two revisions.
// Each side is driven through its own bench/lib.mjs, so it starts the way it started
// then; the load (gateway-load.mjs) is this checkout's for both. --routing puts
// `routing: POLICY` in the tree's catalog only (a baseline from before `routing:` would
// refuse it): `least-loaded` compares the same policy with an old build, the default
// compares what each build does out of the box.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as here from './lib.mjs';
import { measure } from './gateway-load.mjs';

const arg = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const fromFlag = arg('baseline');
const dir = fromFlag ?? process.env.LLMGW_BENCH_BASELINE;
const treeDir = arg('tree') ?? here.root;
const rounds = Number(arg('rounds') ?? 6);
const built = (d) => d !== '' && fs.existsSync(path.join(d, 'bench', 'lib.mjs')) && fs.existsSync(path.join(d, 'packages', 'server', 'dist'));
const refused =
  dir === undefined
    ? 'it needs --baseline=DIR (or LLMGW_BENCH_BASELINE)'
    : !built(dir) || !built(treeDir)
      ? `${built(dir) ? treeDir : dir || '(empty)'} is not a built checkout`
      : !Number.isInteger(rounds) || rounds < 2
        ? `--rounds must be a whole number of at least 2, not ${arg('rounds')}`
        : undefined;
if (refused !== undefined) {
  const checkout = !refused.startsWith('--rounds');
  console.log(`gateway-baseline: skipped, ${refused}.${checkout ? ' To make a built checkout of revision REV:' : ''}`);
  if (checkout) console.log('  git worktree add --detach /tmp/llmgw-base REV && (cd /tmp/llmgw-base && pnpm install && pnpm build)');
  // A wrong flag is an error; without a baseline, or with a wrong one in the environment,
  // `pnpm bench` goes on to the next benchmark.
  process.exit(fromFlag !== undefined || arg('rounds') !== undefined ? 2 : 0);
}
const libOf = (d) => import(pathToFileURL(path.resolve(d, 'bench', 'lib.mjs')).href);
const base = await libOf(dir);
const tree = await libOf(treeDir);

// Both sides run this checkout's test engine: how an engine writes its stream (one
// write per event or several per chunk) moves the gateway's CPU per event, so only the
// gateways may differ.
const testEngine = path.join(here.root, 'packages', 'test-engine', 'dist', 'main.js');
const engine = `["${process.execPath}", "${testEngine}", --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]`;
const routing = arg('routing');
const catalog = (withRouting) =>
  `models:\n  - name: echo\n    source: t\n${withRouting && routing ? `    routing: ${routing}\n` : ''}    profiles:\n      - { name: cpu, engine: command, command: ${engine} }\n`;

/** One side's fleet: its gateway and its replica's engine direct, as undici pools. */
async function side(name, lib, withRouting) {
  const f = await lib.fleet(catalog(withRouting), { core: 0 });
  const r = f.replicas[0];
  return {
    name,
    f,
    gateway: new here.Pool(f.clientUrl, { connections: 128 }),
    direct: new here.Pool(r.endpoint, { connections: 128 }),
    engineKey: r.api_key,
    runs: [],
  };
}

/** One round of one side: c=1 latency added over its engine, CPU per request (c=64) and per SSE event. */
async function round(s) {
  const d = await measure('direct', s.direct, s.engineKey, undefined, { warm: 100, n: 600, ms: 0, streamsEach: 0 });
  const g = await measure('gateway', s.gateway, s.f.secret, s.f.serverPid, { warm: 100, n: 600, ms: 3000, streamsEach: 10 });
  const p50 = (x) => here.percentile(x.lat, 50);
  return { added: p50(g) - p50(d), perReq: 1e6 / g.perCpu, perEvent: 1e6 / g.eventsPerCpu };
}

let sides = [];
try {
  const b = await side('baseline', base, false);
  const t = await side('this tree', tree, true);
  sides = [b, t, { ...b, name: 'baseline again', runs: [] }];
  // A round per server that is not counted: its JIT warms on every path measured.
  for (const s of [b, t]) await round(s);
  for (let i = 0; i < rounds; i++) {
    // The order flips every round, so neither side always follows the other.
    for (const s of i % 2 === 0 ? sides : sides.slice().reverse()) s.runs.push(await round(s));
  }
  const median = (xs) => {
    const sorted = xs.slice().sort((x, y) => x - y);
    const h = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[h] : (sorted[h - 1] + sorted[h]) / 2;
  };
  const of = (s, k) => {
    const m = median(s.runs.map((r) => r[k]));
    // NaN when /proc could not be read for the server's CPU time.
    if (!Number.isFinite(m)) throw new Error(`${s.name}: no figure for ${k} (is /proc readable?)`);
    return m;
  };
  // An added latency near zero makes a ratio meaningless: say so rather than print one.
  const ratio = (x, y) => (y > 0 && x >= 0 ? (x / y).toFixed(2) : 'n/a');
  const [bs, ts, as] = sides;
  const rows = [
    ['gateway CPU per request, c=64 (µs)', 'perReq', 0],
    ['gateway CPU per SSE event (µs)', 'perEvent', 1],
    ['c=1 p50 added over its engine (ms)', 'added', 3],
  ].map(([label, k, digits]) => [label, of(bs, k).toFixed(digits), of(ts, k).toFixed(digits), ratio(of(ts, k), of(bs, k)), ratio(of(as, k), of(bs, k))]);
  console.log(
    `\ngateway of ${path.resolve(treeDir)} against ${path.resolve(dir)}, same run: median of ${rounds} alternating rounds per side, small chat completions on the test engine${routing ? `, this tree with routing: ${routing}` : ''}\n`,
  );
  console.log(here.table(['measure', 'baseline', 'this tree', 'this / baseline', 'baseline again / baseline (noise)'], rows));
} finally {
  await Promise.all(sides.slice(0, 2).flatMap((s) => [s.gateway.close(), s.direct.close()]));
  base.stopAll();
  tree.stopAll();
  setTimeout(() => process.exit(0), 1500);
}
