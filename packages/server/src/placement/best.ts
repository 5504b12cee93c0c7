import { F0, F1, F2, F3, F4, F5, idBefore, type RankInputs } from './ranking.js';

/**
 * A view's best candidate kept current, so a decision reads it instead of scanning every
 * candidate: a tournament tree over the candidates, each leaf a candidate that fits now
 * (or none), each inner entry the better of its two children by the selection rule
 * (`RANKING`, through the same figures `F0`..`F5` the scan in select.ts compares), the
 * root the best. `reserve` changes a few candidates' columns and replays their paths to
 * the root: log2(candidates) comparisons per candidate touched, where a scan read every
 * candidate per decision (the cost that grew with the fleet).
 *
 * It ranks by what the keys read that only `reserve` changes (the columns, the model's
 * counts) or nothing changes (the nodes, the id ranks, the file), so it stands for one
 * set of decision inputs: a decision with nodes to avoid or a caller's own replica map
 * (figures the tree did not rank by) scans as before (select.ts `treeFor`). The order is
 * total once the ids are ranked (no two candidates share an id rank), so the root is the
 * one candidate the scan would keep, whatever order either visits them in.
 */
export interface BestTree {
  /** The inputs it ranks by: a decision may use it when its own inputs equal these. */
  readonly r: RankInputs;
  /** What the profile needs of memory and GPUs (the view's `needs`, copied). */
  readonly needMem: number;
  readonly needPack: number;
  /** The other dynamic checks' columns and needs (the view's `extra`, `extraNeeds`). */
  readonly extra: readonly (Int32Array | Float64Array)[];
  readonly extraNeeds: Float64Array;
  /** Leaves: `size` up, candidate c at size + c; -1 for none. */
  readonly size: number;
  readonly win: Int32Array;
  /** Candidates that fit now: what a scan counts. */
  fit: number;
  /**
   * A figure compared as NaN (memory arithmetic gone wrong) makes the order partial and
   * the scan's answer depend on its order: the tree then stops answering.
   */
  broken: boolean;
}

/** True when candidate `c` fits now: `fitsNow` in select.ts, on the tree's copies of the needs. */
function fits(t: BestTree, c: number): boolean {
  // `c` is a candidate index, in range of every column; `extraNeeds` has one entry per extra column.
  const r = t.r;
  if (r.mem[c]! < t.needMem || r.pack[c]! < t.needPack) return false;
  const extra = t.extra;
  for (let k = 0; k < extra.length; k++) if (extra[k]![c]! < t.extraNeeds[k]!) return false;
  return true;
}

/** The better of candidates `a` and `b` by the selection rule (-1: none). */
function better(r: RankInputs, a: number, b: number): number {
  if (a < 0) return b;
  if (b < 0) return a;
  let x = F0(r, a);
  let y = F0(r, b);
  if (x === y) {
    x = F1(r, a);
    y = F1(r, b);
    if (x === y) {
      x = F2(r, a);
      y = F2(r, b);
      if (x === y) {
        x = F3(r, a);
        y = F3(r, b);
        if (x === y) {
          x = F4(r, a);
          y = F4(r, b);
          if (x === y) {
            x = F5(r, a);
            y = F5(r, b);
            // cand[] indexes the nodes.
            if (x === y) return idBefore(r.nodes[r.cand[b]!]!, r.nodes[r.cand[a]!]!) ? b : a;
          }
        }
      }
    }
  }
  return x < y ? a : b;
}

/** Builds the tree over every candidate of `r` (`count` of them). */
export function buildTree(r: RankInputs, needMem: number, needPack: number, extra: readonly (Int32Array | Float64Array)[], extraNeeds: Float64Array): BestTree {
  const count = r.cand.length;
  let size = 1;
  while (size < count) size *= 2;
  const t: BestTree = { r, needMem, needPack, extra, extraNeeds, size, win: new Int32Array(2 * size).fill(-1), fit: 0, broken: false };
  const win = t.win;
  for (let c = 0; c < count; c++) {
    if (r.mem[c] !== r.mem[c]) t.broken = true;
    if (!fits(t, c)) continue;
    win[size + c] = c;
    t.fit++;
  }
  // Inner entries from the bottom up: 2i and 2i + 1 are within win.
  for (let i = size - 1; i >= 1; i--) win[i] = better(r, win[2 * i]!, win[2 * i + 1]!);
  return t;
}

/** Candidate `c`'s figures changed (a reservation on its node): replays its path to the root. */
export function updateTree(t: BestTree, c: number): void {
  const win = t.win;
  const leaf = t.size + c;
  if (t.r.mem[c] !== t.r.mem[c]) t.broken = true;
  const was = win[leaf]! >= 0;
  const now = fits(t, c);
  win[leaf] = now ? c : -1;
  if (was !== now) t.fit += now ? 1 : -1;
  // An entry whose winner is unchanged and is not `c` compares the same above it: stop there.
  for (let i = leaf >> 1; i >= 1; i >>= 1) {
    const before = win[i]!;
    const after = better(t.r, win[2 * i]!, win[2 * i + 1]!);
    win[i] = after;
    if (after === before && after !== c) return;
  }
}

/**
 * What a scan of one pool of a sharded view found (sharded.ts): its fitting candidates
 * counted and, when it can hold the replica, its best `n` in rank order, their figures
 * and the pool's `POOL_RANKING` figures. It depends only on the pool's own candidates, so
 * it holds until a reservation lands in the pool.
 */
export interface PoolScan {
  fit: number;
  /** The best `n` candidates in rank order; empty when fewer than `n` fit. */
  c: Int32Array;
  keys: Float64Array[];
  /** Undefined when fewer than `n` fit. */
  values: Float64Array | undefined;
}

/** A sharded view's scans by pool, for the decision inputs `r` (as `BestTree.r`). */
export interface PoolCache {
  readonly r: RankInputs;
  /** Candidate → its pool. */
  readonly poolOf: Int32Array;
  /** By pool: undefined to scan again. */
  readonly scans: (PoolScan | undefined)[];
}

/** An empty cache over the pools `poolStart` delimits (candidates of pool p: poolStart[p] .. poolStart[p + 1] - 1). */
export function poolCache(r: RankInputs, poolStart: Int32Array): PoolCache {
  const poolOf = new Int32Array(r.cand.length);
  // poolStart has one entry per pool plus one, each within the candidates.
  for (let p = 0; p + 1 < poolStart.length; p++) poolOf.fill(p, poolStart[p], poolStart[p + 1]);
  return { r, poolOf, scans: new Array<PoolScan | undefined>(poolStart.length - 1).fill(undefined) };
}

/** Candidate `c`'s figures changed: its pool is scanned again on the next decision. */
export function touchPool(cache: PoolCache, c: number): void {
  // `c` is a candidate index: in range of poolOf, whose entries are pools.
  cache.scans[cache.poolOf[c]!] = undefined;
}
