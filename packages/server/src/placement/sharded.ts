import { poolCache, type PoolCache, type PoolScan } from './best.js';
import { NEED_MEM, NEED_PACK, type Column, type Fleet, type ProfileView } from './fleet.js';
import { idBefore, orderAgainst, POOL_RANK_VALUES, rankValues, valuesOrder, type PoolPick, type RankInputs } from './ranking.js';
import { before, blank, extraFit, rankInputs, type Candidate, type Context, type Found } from './select.js';

/**
 * Sharded profiles: N shards on N distinct fitting nodes of one pool. Within a pool,
 * nodes are ranked by the selection rule (`RANKING`, ranking.ts) and the first N taken
 * (rank 0 first). Among pools that can hold the replica, the pool chosen is the first by
 * `POOL_RANKING` (ranking.ts), then the lowest name.
 */
export function pickSharded(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const n = view.req.shards;
  // top[0..k) is the current pool's best k candidates, in order; top[n] is scratch.
  // poolStart has one entry per pool plus one: the `!`s rest on these.
  const top = Array.from({ length: n + 1 }, blank);
  const r = rankInputs(fleet, view, ctx);
  const cache = poolsFor(fleet, view, ctx, r);
  const { needs, extra, extraNeeds, poolStart, poolName } = view;
  let fit = 0;
  let best = -1;
  let bestScan: PoolScan | undefined;
  for (let p = 0; p < poolName.length; p++) {
    let scan = cache?.scans[p];
    if (scan === undefined) {
      scan = scanPool(r, needs, extra, extraNeeds, poolStart[p]!, poolStart[p + 1]!, top, n);
      if (cache !== undefined) cache.scans[p] = scan;
    }
    fit += scan.fit;
    if (scan.values === undefined) continue;
    if (bestScan?.values === undefined || poolBefore(scan.values, poolName[p]!, bestScan.values, poolName[best]!)) {
      best = p;
      bestScan = scan;
    }
  }
  if (bestScan === undefined) return { fit, chosen: undefined, pool: undefined };
  // Copies: a kept scan serves later decisions too. `c` holds candidate indices, `cand` positions.
  const chosen = Array.from(bestScan.c, (c, i): Candidate => {
    const pos = view.cand[c]!;
    return { pos, c, node: fleet.nodes[pos]!, keys: bestScan.keys[i]!.slice() };
  });
  return { fit, chosen, pool: poolName[best] };
}

/**
 * The view's kept pool scans (best.ts `PoolCache`) when they answer this decision: for a
 * decision whose keys read nothing a scan does not depend on only (no nodes to avoid, no
 * caller's replica map), started afresh when the model's counts, the file or the id ranks
 * differ from the ones the scans ranked by. Undefined: scan every pool, keep nothing.
 */
function poolsFor(fleet: Fleet, view: ProfileView, ctx: Context, r: RankInputs): PoolCache | undefined {
  if (ctx.avoid !== undefined || ctx.existing !== undefined) return undefined;
  const known = view.pools;
  if (known !== undefined && known.r.counts === ctx.counts && known.r.file === ctx.file && known.r.idRank === fleet.idRank) return known;
  view.pools = poolCache(r, view.poolStart);
  return view.pools;
}

/** One pool's scan: `poolTop`, its best `n` copied out of `top` when it can hold the replica. */
function scanPool(
  r: RankInputs,
  needs: Float64Array,
  extra: Column[],
  extraNeeds: Float64Array,
  start: number,
  end: number,
  top: Candidate[],
  n: number,
): PoolScan {
  const found = poolTop(r, needs, extra, extraNeeds, start, end, top);
  if (found.k < n) return { fit: found.fit, c: NONE, keys: [], values: undefined };
  const pick: PoolPick = { top, n, fit: found.fit };
  // `top` holds at least `n` candidates.
  return {
    fit: found.fit,
    c: Int32Array.from({ length: n }, (_, i) => top[i]!.c),
    keys: Array.from({ length: n }, (_, i) => top[i]!.keys.slice()),
    values: Float64Array.from(POOL_RANK_VALUES, (of) => of(pick, start)),
  };
}

const NONE = new Int32Array(0);

/**
 * The best candidates of one pool, candidates `start` to `end - 1`, in rank order into
 * `top[0..k)` (at most `top.length - 1`; `top`'s last entry is scratch), with the
 * pool's fitting candidates counted. Takes every input as an argument or in `r`, as
 * `bestFit` in select.ts does and for the same reason: V8 keeps its optimised code valid.
 */
function poolTop(
  r: RankInputs,
  needs: Float64Array,
  extra: Column[],
  extraNeeds: Float64Array,
  start: number,
  end: number,
  top: Candidate[],
): { k: number; fit: number } {
  // Columns have one entry per candidate and cand[c] indexes `nodes`; every index into
  // `top` is in 0..n. The `!`s rest on these.
  const { cand, mem: mems, pack: packs, nodes } = r;
  const n = top.length - 1;
  const needMem = needs[NEED_MEM]!;
  const needPack = needs[NEED_PACK]!;
  let k = 0;
  let fit = 0;
  for (let c = start; c < end; c++) {
    if (mems[c]! < needMem || packs[c]! < needPack || (extra.length !== 0 && !extraFit(extra, extraNeeds, c))) continue;
    fit++;
    const pos = cand[c]!;
    if (k === n) {
      // Full: a candidate that does not beat the last is dropped without working out its
      // figures past the first key it differs on.
      const last = top[n - 1]!;
      const order = orderAgainst(r, c, last.keys);
      if (order > 0 || (order === 0 && !idBefore(nodes[pos]!, last.node))) continue;
    }
    const next = top[n]!;
    next.pos = pos;
    next.c = c;
    next.node = nodes[pos]!;
    rankValues(r, c, next.keys);
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
  return { k, fit };
}

/** True when pool `a` (its `POOL_RANKING` figures and name) goes before pool `b`. */
function poolBefore(a: Float64Array, aName: string, b: Float64Array, bName: string): boolean {
  const order = valuesOrder(a, b);
  return order !== 0 ? order < 0 : aName < bName;
}
