import type { NodeSnapshot } from '../snapshot.js';
import { NEED_MEM, NEED_PACK, type Column, type Fleet, type ProfileView } from './fleet.js';
import { avoidKey, before, blank, cachedKey, existingKey, extraFit, type Candidate, type Context, type Found } from './select.js';

/**
 * Sharded profiles: N shards on N distinct fitting nodes of one pool. Within a pool,
 * nodes are ranked by the selection rule (select.ts) and the first N taken (rank 0
 * first). Among pools that can hold the replica, the pool chosen has, in order: the
 * fewest avoided nodes among those N, the fewest replicas of this model on them
 * (spread), the fewest fitting nodes (best fit: keep the large pools whole for larger
 * replicas), the fewest free GPUs on those N (pack), then the lowest name.
 */
export function pickSharded(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const n = view.req.shards;
  // top[0..k) is the current pool's best k candidates, in order; top[n] is scratch.
  // Every index into `top` below is in 0..n, and poolStart has one entry per pool plus
  // one: the `!`s rest on these.
  const top = Array.from({ length: n + 1 }, blank);
  const { cand, mem, pack, needs, extra, extraNeeds, poolStart } = view;
  const { avoid, existing, counts, file } = ctx;
  let fit = 0;
  let best: { pool: string; nodes: Candidate[]; score: number[] } | undefined;
  for (let p = 0; p < view.poolName.length; p++) {
    const start = poolStart[p]!;
    const end = poolStart[p + 1]!;
    const k = poolTop(cand, mem, pack, needs, extra, extraNeeds, fleet.nodes, start, end, top, avoid, existing, counts, file);
    const poolFit = FIT[0]!;
    fit += poolFit;
    if (k < n) continue;
    let avoided = 0;
    let spread = 0;
    let packed = 0;
    for (let i = 0; i < n; i++) {
      const t = top[i]!;
      avoided += t.avoid;
      spread += t.existing;
      packed += t.pack;
    }
    const score = [avoided, spread, poolFit, packed];
    const pool = view.poolName[p]!;
    if (best === undefined || scoreBefore(score, pool, best.score, best.pool)) {
      best = {
        pool,
        score,
        // Copies: the scratch objects are reused for the next pool.
        nodes: top.slice(0, n).map((t) => ({ ...t })),
      };
    }
  }
  return { fit, chosen: best?.nodes, pool: best?.pool };
}

/** `poolTop`'s second result, the pool's fitting candidates counted: the loop allocates nothing. */
const FIT = new Int32Array(1);

/**
 * The best candidates of one pool, candidates `start` to `end - 1`, in rank order into
 * `top[0..k)` (k returned, at most `top.length - 1`; `top`'s last entry is scratch), the
 * fitting ones counted in FIT[0]. Takes every input as an argument, as `bestFit` in
 * select.ts does and for the same reason: V8 keeps its optimised code valid.
 */
function poolTop(
  cand: Int32Array,
  mems: Float64Array,
  packs: Int32Array,
  needs: Float64Array,
  extra: Column[],
  extraNeeds: Float64Array,
  nodes: readonly NodeSnapshot[],
  start: number,
  end: number,
  top: Candidate[],
  avoid: ReadonlySet<string> | undefined,
  existing: ReadonlyMap<string, number> | undefined,
  counts: Int32Array | undefined,
  file: string | undefined,
): number {
  // Columns have one entry per candidate and cand[c] indexes `nodes` and `counts`; every
  // index into `top` is in 0..n. The `!`s rest on these.
  const n = top.length - 1;
  const needMem = needs[NEED_MEM]!;
  const needPack = needs[NEED_PACK]!;
  let k = 0;
  let fit = 0;
  for (let c = start; c < end; c++) {
    const mem = mems[c]!;
    const pack = packs[c]!;
    if (mem < needMem || pack < needPack || (extra.length !== 0 && !extraFit(extra, extraNeeds, c))) continue;
    fit++;
    const pos = cand[c]!;
    const node = nodes[pos]!;
    const next = top[n]!;
    next.pos = pos;
    next.c = c;
    next.node = node;
    next.avoid = avoidKey(avoid, nodes, pos);
    next.existing = existingKey(existing, counts, nodes, pos);
    next.pack = pack;
    next.mem = mem;
    next.cached = file === undefined ? 0 : cachedKey(node, file);
    if (k === n && !before(next, top[n - 1]!)) continue;
    // Insert in order, dropping the last when full.
    let i = k < n ? k++ : n - 1;
    top[n] = top[i]!;
    top[i] = next;
    while (i > 0 && before(top[i]!, top[i - 1]!)) {
      const t = top[i - 1]!;
      top[i - 1] = top[i]!;
      top[i] = t;
      i--;
    }
  }
  FIT[0] = fit;
  return k;
}

function scoreBefore(a: number[], aName: string, b: number[], bName: string): boolean {
  // Scores all have the same length.
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return aName < bName;
}
