import type { GpuReport } from '@llmgw/shared';
import type { NodeSnapshot } from '../snapshot.js';
import { NEED_MEM, NEED_PACK, type Column, type Fleet, type ProfileView } from './fleet.js';
import { buildTree, type BestTree } from './best.js';
import { F0, F1, F2, F3, F4, F5, idBefore, RANK_VALUES, rankValues, valuesOrder, type RankInputs } from './ranking.js';
import { serves } from './requirement.js';

/**
 * Choosing among fitting nodes: the best by the selection rule, `RANKING` (ranking.ts).
 * A candidate a pick loop keeps: which node, and its figures.
 */
export interface Candidate {
  pos: number;
  /** Index into the view's candidate arrays. */
  c: number;
  node: NodeSnapshot;
  /** Its figure for each key of `RANKING`, in order, lowest first (`RANK_VALUES`). */
  keys: Float64Array;
}

/** True when `a` ranks before `b` by the selection rule. */
export function before(a: Candidate, b: Candidate): boolean {
  const order = valuesOrder(a.keys, b.keys);
  return order !== 0 ? order < 0 : idBefore(a.node, b.node);
}

/** A candidate to fill in: the scratch entries of sharded.ts's pool scan. */
export function blank(): Candidate {
  return { pos: -1, c: -1, node: undefined as unknown as NodeSnapshot, keys: new Float64Array(RANK_VALUES.length) };
}

/** What one decision knows beyond the fleet: the model's spread and the nodes to avoid. */
export interface Context {
  /** Replicas of this model by node id, when the caller says; else `counts`. */
  existing: ReadonlyMap<string, number> | undefined;
  /** Replicas of this model by position, from the reservations. */
  counts: Int32Array | undefined;
  avoid: ReadonlySet<string> | undefined;
  /** The SHA-256 (lower case) of the file the profile's agents fetch; undefined when none. */
  file?: string | undefined;
}

/** What the keys of `RANKING` read in one decision over `view`. */
export function rankInputs(fleet: Fleet, view: ProfileView, ctx: Context): RankInputs {
  // Always these fields in this order: one shape for every decision.
  return {
    nodes: fleet.nodes,
    cand: view.cand,
    pack: view.pack,
    mem: view.mem,
    idRank: fleet.idRank,
    avoid: ctx.avoid,
    existing: ctx.existing,
    counts: ctx.counts,
    file: ctx.file,
  };
}

/** True when candidate `c` passes the view's dynamic checks: no allocation, no strings. */
export function fitsNow(view: ProfileView, c: number): boolean {
  // `c` is a candidate index, in range of every column; `needs` has its two entries.
  const { mem, pack, needs, extra } = view;
  return mem[c]! >= needs[NEED_MEM]! && pack[c]! >= needs[NEED_PACK]! && (extra.length === 0 || extraFit(extra, view.extraNeeds, c));
}

/** The dynamic checks other than GPUs and memory (a view's `extra`), on candidate `c`. */
export function extraFit(extra: Column[], extraNeeds: Float64Array, c: number): boolean {
  // `extraNeeds` has one entry per extra column, and `c` is in range of each.
  for (let k = 0; k < extra.length; k++) if (extra[k]![c]! < extraNeeds[k]!) return false;
  return true;
}

/** What a pick found: the fitting nodes counted, and the chosen ones (rank order). */
export interface Found {
  fit: number;
  chosen: Candidate[] | undefined;
  pool: string | undefined;
}

/**
 * One shard: the best fitting node, kept as we go, without sorting or collecting. This
 * is the hot loop of a decision: the winner's figures are kept in one array and a
 * candidate's are worked out only as far as the first key it differs on.
 */
export function pickSingle(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const keys = new Float64Array(RANK_VALUES.length);
  const tree = treeFor(fleet, view, ctx);
  let best: number;
  let fit: number;
  if (tree !== undefined) {
    // The root (entry 1) is the best fitting candidate; its figures as the scan leaves them.
    best = tree.win[1]!;
    fit = tree.fit;
    if (best >= 0) rankValues(tree.r, best, keys);
  } else {
    ({ best, fit } = bestFit(rankInputs(fleet, view, ctx), view.needs, view.extra, view.extraNeeds, keys));
  }
  if (best < 0) return { fit, chosen: undefined, pool: undefined };
  // `best` is a candidate index: in range of the view's arrays, and cand[best] of `nodes`.
  const pos = view.cand[best]!;
  const node = fleet.nodes[pos]!;
  return { fit, chosen: [{ pos, c: best, node, keys }], pool: node.pool };
}

/**
 * The view's tree (best.ts) when it answers this decision: once the ids are ranked (the
 * fleet's second decision on), for a decision whose keys read nothing the tree does not
 * hold (no nodes to avoid, no caller's replica map), built on first such decision and
 * again when the model's counts or the file differ from the ones it ranked by.
 */
export function treeFor(fleet: Fleet, view: ProfileView, ctx: Context): BestTree | undefined {
  if (ctx.avoid !== undefined || ctx.existing !== undefined || fleet.idRank.length === 0) return undefined;
  let tree = view.best;
  if (tree === undefined || tree.r.counts !== ctx.counts || tree.r.file !== ctx.file || tree.r.idRank !== fleet.idRank) {
    tree = buildTree(rankInputs(fleet, view, ctx), view.needs[NEED_MEM]!, view.needs[NEED_PACK]!, view.extra, view.extraNeeds);
    view.best = tree;
  }
  return tree.broken ? undefined : tree;
}

/**
 * The loop of `pickSingle`: the index of the best fitting candidate (-1 when none) and
 * the fitting ones counted, the winner's figures left in `keys`. The rest of what it
 * reads comes in as arguments or in `r`, whose shape never changes, rather than as
 * fields of the fleet, view or context, and every figure from a typed array: V8 throws
 * away optimised code that read a field whose type changes (the fleet's `idRank` once
 * ranked, say) or that was handed a number stored differently than before (a small
 * integer one call, a double the next), and on Node 20 that has been seen to leave this
 * loop in unoptimised code for dozens of decisions, doubling their cost.
 */
function bestFit(r: RankInputs, needs: Float64Array, extra: Column[], extraNeeds: Float64Array, keys: Float64Array): { best: number; fit: number } {
  // Every column has one entry per candidate (cand.length); cand[c] indexes `nodes`;
  // `keys` has one entry per key. The `!`s below rest on these.
  const { cand, mem: mems, pack: packs, nodes } = r;
  const nExtra = extra.length;
  const needMem = needs[NEED_MEM]!;
  const needPack = needs[NEED_PACK]!;
  let fit = 0;
  let best = -1;
  // The best so far's figure for each key of RANKING, in its order, kept in locals: in an
  // array (and compared through `orderAgainst`) a decision cost 1.4x as much, same run,
  // 5,000 nodes. One local and one line per key; ranking.ts fails at load when RANKING
  // has another number of keys than F0..F5.
  let b0 = 0;
  let b1 = 0;
  let b2 = 0;
  let b3 = 0;
  let b4 = 0;
  let b5 = 0;
  for (let c = 0; c < cand.length; c++) {
    if (mems[c]! < needMem || packs[c]! < needPack || (nExtra !== 0 && !extraFit(extra, extraNeeds, c))) continue;
    fit++;
    if (best >= 0) {
      // The first key on which `c` differs from the best so far decides; the keys after
      // it are not worked out.
      let v = F0(r, c);
      if (v !== b0) {
        if (v > b0) continue;
      } else if ((v = F1(r, c)) !== b1) {
        if (v > b1) continue;
      } else if ((v = F2(r, c)) !== b2) {
        if (v > b2) continue;
      } else if ((v = F3(r, c)) !== b3) {
        if (v > b3) continue;
      } else if ((v = F4(r, c)) !== b4) {
        if (v > b4) continue;
      } else if ((v = F5(r, c)) !== b5) {
        if (v > b5) continue;
      } else if (!idBefore(nodes[cand[c]!]!, nodes[cand[best]!]!)) {
        continue;
      }
    }
    // A new best, rare after the first few candidates: its figures are worked out anew.
    b0 = F0(r, c);
    b1 = F1(r, c);
    b2 = F2(r, c);
    b3 = F3(r, c);
    b4 = F4(r, c);
    b5 = F5(r, c);
    best = c;
  }
  keys.set([b0, b1, b2, b3, b4, b5]);
  return { best, fit };
}

/** Lowest indices first: deterministic, and what an operator reading nvidia-smi expects. */
export function chooseGpus(fleet: Fleet, view: ProfileView, chosen: Candidate): GpuReport[] {
  const req = view.req;
  if (req.gpus === 0) return [];
  const held = fleet.usage[chosen.pos]?.gpuUuids;
  const free = chosen.node.gpus.filter((g) => serves(req, g) && !(held?.has(g.uuid as string) ?? false));
  free.sort((a, b) => a.index - b.index);
  return free.slice(0, req.gpus);
}
