import type { Fleet, ProfileView } from './fleet.js';
import { before, blank, dynamicFit, type Candidate, type Context, type Found } from './select.js';

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
  let fit = 0;
  let best: { pool: string; nodes: Candidate[]; score: number[] } | undefined;
  for (let p = 0; p < view.poolName.length; p++) {
    let k = 0;
    let poolFit = 0;
    const end = view.poolStart[p + 1]!;
    for (let c = view.poolStart[p]!; c < end; c++) {
      const cand = top[n]!;
      if (!dynamicFit(fleet, view, c, ctx, cand)) continue;
      poolFit++;
      if (k === n && !before(cand, top[n - 1]!)) continue;
      // Insert in order, dropping the last when full.
      let i = k < n ? k++ : n - 1;
      top[n] = top[i]!;
      top[i] = cand;
      while (i > 0 && before(top[i]!, top[i - 1]!)) {
        const t = top[i - 1]!;
        top[i - 1] = top[i]!;
        top[i] = t;
        i--;
      }
    }
    fit += poolFit;
    if (k < n) continue;
    let avoid = 0;
    let existing = 0;
    let pack = 0;
    for (let i = 0; i < n; i++) {
      const t = top[i]!;
      avoid += t.avoid;
      existing += t.existing;
      pack += t.pack;
    }
    const score = [avoid, existing, poolFit, pack];
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

function scoreBefore(a: number[], aName: string, b: number[], bName: string): boolean {
  // Scores all have the same length.
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return aName < bName;
}
