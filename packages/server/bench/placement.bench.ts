import type { Model, Profile } from '@llmgw/shared';
import { performance } from 'node:perf_hooks';
import { place, placeMany, reservationsFor, type PlacementRequest } from '../src/placement/index.js';
import type { NodeSnapshot, Reservation } from '../src/snapshot.js';
import { makeGpu, makeH100Node, makeNode, makeRtx4090Node } from '../test/factories.js';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildSide, cpuSamples, importSide, minMedian, rng, type Side } from './baseline.js';

/**
 * Placement benchmark (`pnpm bench`; prints figures, asserts nothing), in the manner of
 * scheduler_perf: a synthetic fleet, replicas placed one after another with their
 * reservations accumulating, every node evaluated for every replica.
 *
 * Columns:
 * - placements/s, ms/placement: `placeMany`, 1,000 replicas over one prepared fleet
 *   (static verdicts remembered per profile, reservations kept current), what a
 *   reconciler tick does;
 * - place() /s: the same replicas through `place`, one call each with the growing
 *   reservation list: every call prepares the snapshot from scratch (a caller that keeps
 *   nothing between decisions);
 * - naive /s: baseline in the same process: `place` with `explainWinner`, i.e. every
 *   check of every node with every failure rendered as a string, for every decision
 *   (first 200 replicas only, it is slow);
 * - explain ms: one failing placement (a model nothing fits) over the whole fleet
 *   through `place`, every rejection built;
 * - placed: replicas that found room (the 500-node fleet fills up; the failures are
 *   explained, and that is part of the cost).
 *
 * Goals (issue 3): ≥ 5,000 placements/s at 5,000 nodes on one core, explain ≤ 50 ms.
 *
 * Then the same run against a baseline: placement as it was at `--baseline=REV` (default
 * HEAD, i.e. what the working tree changes; `none` to skip) and as it is in this tree,
 * each built the same way into a file of its own, each run in fresh processes that
 * alternate (`--processes=N` per side, default 4), over 5,000 and 20,000 nodes
 * (`--compare=N,M`; fewer samples on the larger fleet): every process warms up with the
 * same calls, then takes CPU time per call (min and median of its samples).
 * The table gives, per side, the median over its processes of those figures, and the
 * baseline run again in processes of its own ("baseline again"): how far two runs of
 * the same code land apart here, the noise any ratio is to be read against. Separate
 * runs on a shared machine differ by more than most changes; the ratios of the same run
 * are the figures to quote. One process per run, not both sides in one: in one process
 * the side measured second inherits the first one's heap and V8's allocation-site
 * decisions, which moved explain by 2x either way.
 */

/** An element of the non-empty `xs`, drawn with one call of `r`. */
function oneOf<T>(r: () => number, xs: readonly T[]): T {
  const x = xs[Math.floor(r() * xs.length)];
  if (x === undefined) throw new Error('oneOf: empty list');
  return x;
}

/**
 * 40% 8×H100 nodes in InfiniBand pools of 16, 30% 2×RTX-4090 nodes, 30% CPU nodes; a few
 * cordoned, draining, silent, with an unhealthy GPU, or from an agent that did not report
 * memory, as a real fleet has.
 */
function fleet(n: number, seed = 1): NodeSnapshot[] {
  const r = rng(seed);
  const roles = ['coding', 'batch', 'general'];
  const nodes: NodeSnapshot[] = [];
  for (let i = 0; i < n; i++) {
    const kind = r();
    const id = `node-${String(i).padStart(5, '0')}`;
    const labels = { role: oneOf(r, roles), zone: `z${i % 3}` };
    let node: NodeSnapshot;
    if (kind < 0.4) {
      node = makeH100Node(id, { pool: `ib-${Math.floor(i / 40)}`, labels });
      if (r() < 0.03) node.gpus[3] = makeGpu({ index: 3, uuid: `${id}-gpu-3`, problems: ['fell off the bus (Xid 79)'] });
    } else if (kind < 0.7) {
      node = makeRtx4090Node(id, { labels, pool: `ws-${Math.floor(i / 100)}` });
    } else {
      node = makeNode({ id, labels, memoryTotalMb: oneOf(r, [16, 32, 64, 128, 256]) * 1024 });
    }
    const s = r();
    if (s < 0.02) node.admin = 'cordoned';
    else if (s < 0.03) node.admin = 'draining';
    else if (s < 0.04) {
      node.liveness = 'not-ready';
      node.lastSeenAgoS = 45;
    }
    if (r() < 0.03) node.memoryTotalMb = undefined;
    nodes.push(node);
  }
  return nodes;
}

const p = (x: Partial<Profile> & { name: string }): Profile => ({ engine: 'vllm', ...x });

/** A catalog with weights: how often each model appears among the replicas to place. */
const catalog: { model: Model; weight: number }[] = [
  {
    weight: 25,
    model: {
      name: 'qwen-coder-14b',
      source: 'Qwen/Qwen2.5-Coder-14B-Instruct',
      profiles: [
        p({ name: 'gpu', gpus: 1, min_gpu_memory_gb: 20, node_selector: { role: 'coding' } }),
        p({ name: 'cpu', engine: 'llama.cpp', min_memory_gb: 24, node_selector: { role: 'coding' } }),
      ],
    },
  },
  { weight: 25, model: { name: 'small-cpu', source: 'x', profiles: [p({ name: 'cpu', engine: 'llama.cpp', min_memory_gb: 8 })] } },
  { weight: 20, model: { name: 'llama-70b', source: 'x', profiles: [p({ name: 'h100x4', gpus: 4, gpu_class: ['H100'], min_memory_gb: 128 })] } },
  { weight: 15, model: { name: 'embed', source: 'x', profiles: [p({ name: 'rtx', gpus: 1, gpu_class: ['RTX-4090'] })] } },
  {
    weight: 10,
    model: {
      name: 'deepseek-v3',
      source: 'x',
      profiles: [p({ name: 'tp16', gpus: 8, gpu_class: ['H100'], shards: 2, fabric: 'infiniband', min_memory_gb: 512 })],
    },
  },
  {
    // The preferred profile never fits, so every decision also explains it.
    weight: 5,
    model: {
      name: 'mixtral-b200',
      source: 'x',
      profiles: [p({ name: 'b200', gpus: 8, gpu_class: ['B200'] }), p({ name: 'h100', gpus: 2, gpu_class: ['H100'] })],
    },
  },
];

/** Nothing fits it: every node fails, the explain path end to end. */
const unplaceable: Model = {
  name: 'nothing-fits',
  source: 'x',
  profiles: [p({ name: 'gb200', gpus: 4, gpu_class: ['GB200'], min_memory_gb: 2048, node_selector: { role: 'frontier' } })],
};

/** `--only=name` places replicas of one model, to see what each costs. */
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);

function requests(count: number, seed = 2): PlacementRequest[] {
  const r = rng(seed);
  const mix = only ? catalog.filter((c) => c.model.name === only) : catalog;
  const total = mix.reduce((s, c) => s + c.weight, 0);
  return Array.from({ length: count }, (_, i) => {
    let x = r() * total;
    const pick = mix.find((c) => (x -= c.weight) < 0) ?? mix[0];
    if (pick === undefined) throw new Error(`no model named ${only ?? ''} in the catalog`);
    return { model: pick.model, replicaId: `r-${i}` };
  });
}

function timeIt(fn: () => void, repeat: number): number {
  const times: number[] = [];
  for (let i = 0; i < repeat; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? NaN;
}

/** The `place()` path: the caller hands over its reservation list each time. */
function placeOneByOne(nodes: NodeSnapshot[], reqs: PlacementRequest[], explainWinner: boolean): number {
  let held: Reservation[] = [];
  let placed = 0;
  for (const r of reqs) {
    const out = place({ model: r.model, nodes, reservations: held, explainWinner });
    if (out.placement === undefined) continue;
    placed++;
    held = held.concat(reservationsFor(out.placement, r.replicaId, r.model.name));
  }
  return placed;
}

const REPLICAS = 1000;
const NAIVE_REPLICAS = 200;

function run(size: number): string[] {
  const nodes = fleet(size);
  const reqs = requests(REPLICAS);
  let placed = 0;
  const manyMs = timeIt(() => {
    placed = placeMany({ nodes, reservations: [], requests: reqs }).outcomes.filter((o) => o.placement).length;
  }, 5);
  const onceMs = timeIt(() => placeOneByOne(nodes, reqs, false), 3);
  const naiveMs = timeIt(() => placeOneByOne(nodes, reqs.slice(0, NAIVE_REPLICAS), true), 3);
  let rejections = 0;
  const explainMs = timeIt(() => {
    rejections = place({ model: unplaceable, nodes, reservations: [] }).rejections.length;
  }, 9);
  const perS = (n: number, ms: number) => Math.round((n / ms) * 1000).toLocaleString('en-US');
  return [
    size.toLocaleString('en-US'),
    perS(REPLICAS, manyMs),
    (manyMs / REPLICAS).toFixed(3),
    perS(REPLICAS, onceMs),
    perS(NAIVE_REPLICAS, naiveMs),
    explainMs.toFixed(1),
    `${placed}/${REPLICAS}`,
    rejections.toLocaleString('en-US'),
  ];
}

function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(w[i] ?? 0) : c.padStart(w[i] ?? 0))).join(' | ')} |`;
  return [line(head), `|${w.map((x, i) => (i === 0 ? ':' : '') + '-'.repeat(x + 1) + (i === 0 ? '' : ':')).join('|')}|`, ...rows.map(line)].join('\n');
}

/** `--name=value` from the command line. */
function arg(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

/** What one comparison process measures: explain and placeMany over one fleet. */
interface Measured {
  explain: Side;
  many: Side;
}

/** Fleet sizes the same-run comparison measures (`--compare=N,M`). */
const compareSizes = (arg('compare') ?? '5000,20000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);

/**
 * A comparison process (`--child=FILE`, `--size=N`, default 5,000): imports one side's
 * build, warms up with the same calls as every other side, measures, prints its figures
 * as JSON, and exits. Fewer samples on a larger fleet, so each size costs about the same.
 */
async function child(file: string, size: number): Promise<Measured> {
  const api = await importSide(file);
  const nodes = fleet(size);
  const reqs = requests(REPLICAS);
  const explain = () => void api.place({ model: unplaceable, nodes, reservations: [] });
  const many = () => void api.placeMany({ nodes, reservations: [], requests: reqs });
  const scale = Math.min(1, 5000 / size);
  const times = (n: number) => Math.max(3, Math.round(n * scale));
  cpuSamples(explain, times(20));
  cpuSamples(many, times(5));
  return { explain: minMedian(cpuSamples(explain, times(60))), many: minMedian(cpuSamples(many, times(20))) };
}

const childFile = arg('child');
if (childFile !== undefined) {
  process.stdout.write(JSON.stringify(await child(childFile, Number(arg('size') ?? 5000))));
  process.exit(0);
}

// Warm the JIT on a small fleet so the first size is not measured cold.
run(200);

const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
const rows = (sizes.length > 0 ? sizes : [500, 5000, 20000]).map(run);
console.log(`placement benchmark: ${REPLICAS} replicas per fleet, every node evaluated; node ${process.version}, one core`);
console.log(table(['nodes', 'placements/s', 'ms/placement', 'place() /s', `naive /s (${NAIVE_REPLICAS})`, 'explain ms', 'placed', 'rejections'], rows));

const baselineRev = arg('baseline') ?? 'HEAD';
if (baselineRev !== 'none') {
  const base = await buildSide(baselineRev, 'baseline');
  const tree = await buildSide('tree', 'tree');
  if ('error' in base) console.log(`\n${base.error}`);
  else if ('error' in tree) console.log(`\n${tree.error}`);
  else {
    const processes = Math.max(1, Number(arg('processes') ?? 4));
    const self = fileURLToPath(import.meta.url);
    const mid = (xs: number[]): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
    const of = (runs: Measured[], what: keyof Measured): Side => ({
      min: mid(runs.map((r) => r[what].min)),
      median: mid(runs.map((r) => r[what].median)),
    });
    const pair = (x: Side): string => `${x.min.toFixed(2)} / ${x.median.toFixed(2)}`;
    const ratio = (x: Side, y: Side): string => `${(x.min / y.min).toFixed(2)} / ${(x.median / y.median).toFixed(2)}`;
    const rows: string[][] = [];
    for (const size of compareSizes) {
      const sides = [
        { name: 'baseline', file: base.file, runs: [] as Measured[] },
        { name: 'this tree', file: tree.file, runs: [] as Measured[] },
        { name: 'baseline again', file: base.file, runs: [] as Measured[] },
      ];
      for (let i = 0; i < processes; i++) {
        // The order flips every round, so neither side always runs on a warmer machine.
        for (const side of i % 2 === 0 ? sides : sides.slice().reverse()) {
          const out = execFileSync(process.execPath, [self, `--child=${side.file}`, `--size=${size}`], { encoding: 'utf8', maxBuffer: 1 << 20 });
          side.runs.push(JSON.parse(out) as Measured);
        }
      }
      const [b, c, again] = sides.map((side) => side.runs);
      const row = (label: string, what: keyof Measured): string[] => {
        const [bs, cs, as] = [of(b ?? [], what), of(c ?? [], what), of(again ?? [], what)];
        return [`${size.toLocaleString('en-US')} nodes, ${label}`, pair(bs), pair(cs), ratio(cs, bs), ratio(as, bs)];
      };
      rows.push(row('explain, one model nothing fits', 'explain'), row(`placeMany, ${REPLICAS} replicas`, 'many'));
    }
    console.log(`\nsame run against ${baselineRev}: CPU ms per call, min / median, each the median of ${processes} fresh processes per side, alternating`);
    console.log(table(['same run', `${baselineRev} ms`, 'this tree ms', 'this / baseline', 'baseline again / baseline (noise)'], rows));
  }
}
