import type { GpuReport } from '@llmgw/shared';
import type { NodeSnapshot } from '../snapshot.js';
import { NEED_MEM, NEED_PACK, type Column, type Fleet, type ProfileView } from './fleet.js';
import { serves } from './requirement.js';

/**
 * Choosing among fitting nodes. The selection rule, compared field by field, lowest first:
 *
 * 1. `avoid`: nodes in `avoidNodes` only as a last resort (a replica just failed there,
 *    and the same node straight away would likely fail the same way);
 * 2. `existing`: fewer replicas of this model already on the node: spread a model's
 *    replicas so one machine going away takes down as few of them as possible;
 * 3. `pack`: best fit on GPUs. For a GPU profile, the fewest free GPUs of the accepted
 *    kind that still suffice, so partly used machines fill up and whole ones stay free
 *    for 8-GPU models. For a CPU profile, the fewest free GPUs of any kind, so CPU work
 *    goes to CPU machines (or GPU machines that are full) before idle GPU machines;
 * 4. `mem`: best fit on host memory, the least free memory that still suffices (a node
 *    that did not report memory counts as unlimited, so known fits go first);
 * 5. `cached`: for a profile whose source is a file agents fetch (files/README.md), a node
 *    whose agent already holds that file (by its SHA-256, from `NodeReport.files`), so
 *    the replica starts without a transfer. After the rules above on purpose: the spread
 *    and the fit keep the fleet healthy, and a download is a delay that ends, so the
 *    file decides among nodes those rules leave equal (identical machines, the common
 *    case of a CPU fleet), never against them;
 * 6. node id, so the same inputs always give the same answer, whatever the input order.
 *
 * `pack` and `mem` are the GPU and memory checks' columns of the profile's view.
 */
export interface Candidate {
  pos: number;
  /** Index into the view's candidate arrays. */
  c: number;
  node: NodeSnapshot;
  avoid: number;
  existing: number;
  pack: number;
  mem: number;
  /** 0 when the node holds the profile's file (or the profile fetches none), else 1. */
  cached: number;
}

export function before(a: Candidate, b: Candidate): boolean {
  if (a.avoid !== b.avoid) return a.avoid < b.avoid;
  if (a.existing !== b.existing) return a.existing < b.existing;
  if (a.pack !== b.pack) return a.pack < b.pack;
  if (a.mem !== b.mem) return a.mem < b.mem;
  if (a.cached !== b.cached) return a.cached < b.cached;
  return a.node.id < b.node.id;
}

export function blank(): Candidate {
  return { pos: -1, c: -1, node: undefined as unknown as NodeSnapshot, avoid: 0, existing: 0, pack: 0, mem: 0, cached: 0 };
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

/** 1 for a node in `avoid`, else 0: the `avoid` rule. The node is read only when there is a set to look in. */
export function avoidKey(avoid: ReadonlySet<string> | undefined, nodes: readonly NodeSnapshot[], pos: number): number {
  return avoid !== undefined && avoid.has(nodes[pos]!.id) ? 1 : 0;
}

/**
 * Replicas of this model on the node at `pos`: the `existing` rule, from the caller's map
 * when it gave one, else from the reservations' counts (then the node is not read).
 */
export function existingKey(
  existing: ReadonlyMap<string, number> | undefined,
  counts: Int32Array | undefined,
  nodes: readonly NodeSnapshot[],
  pos: number,
): number {
  return existing !== undefined ? existing.get(nodes[pos]!.id) ?? 0 : counts !== undefined ? counts[pos]! : 0;
}

/** 0 when `node` holds `file` (or there is none to hold), else 1: the `cached` rule. */
export function cachedKey(node: NodeSnapshot, file: string | undefined): number {
  return file === undefined || node.files?.has(file) === true ? 0 : 1;
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
 * is the hot loop of a decision, so it runs the dynamic checks and `before` inline on
 * locals; the order is exactly `before`'s.
 */
export function pickSingle(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const { nodes, idRank } = fleet;
  const { avoid, existing, counts, file } = ctx;
  const { cand, pack, mem } = view;
  const best = bestFit(cand, mem, pack, view.needs, view.extra, view.extraNeeds, nodes, idRank, avoid, existing, counts, file);
  const fit = BEST[B_FIT]!;
  if (best < 0) return { fit, chosen: undefined, pool: undefined };
  // `best` is a candidate index: in range of the view's arrays, and cand[best] of `nodes`.
  const pos = cand[best]!;
  const node = nodes[pos]!;
  const chosen: Candidate = {
    pos,
    c: best,
    node,
    avoid: BEST[B_AVOID]!,
    existing: BEST[B_EXISTING]!,
    pack: pack[best]!,
    mem: mem[best]!,
    cached: BEST[B_CACHED]!,
  };
  return { fit, chosen: [chosen], pool: node.pool };
}

/**
 * `bestFit`'s other results, so the loop allocates nothing: the fitting candidates
 * counted, and the best one's `avoid`, `existing` and `cached` keys (doubles: `existing`
 * comes from the caller's map as it is).
 */
const BEST = new Float64Array(4);
const B_FIT = 0;
const B_AVOID = 1;
const B_EXISTING = 2;
const B_CACHED = 3;

/**
 * The loop of `pickSingle`: the index of the best fitting candidate (-1 when none), the
 * count and the winner's keys in BEST. Everything it reads comes in as an argument rather than as a field of
 * the fleet, view or context, and every figure from a typed array: V8 throws away
 * optimised code that read a field whose type changes (the fleet's `idRank` once ranked,
 * say) or that was handed a number stored differently than before (a small integer one
 * call, a double the next), and on Node 20 that has been seen to leave this loop in
 * unoptimised code for dozens of decisions, doubling their cost. An argument's type is
 * checked once per call instead.
 */
function bestFit(
  cand: Int32Array,
  mems: Float64Array,
  packs: Int32Array,
  needs: Float64Array,
  extra: Column[],
  extraNeeds: Float64Array,
  nodes: readonly NodeSnapshot[],
  idRank: Int32Array,
  avoid: ReadonlySet<string> | undefined,
  existing: ReadonlyMap<string, number> | undefined,
  counts: Int32Array | undefined,
  file: string | undefined,
): number {
  // Every column has one entry per candidate (cand.length); cand[c] indexes `nodes`, and
  // `counts`/`idRank` have one entry per node. The `!`s below rest on these.
  const nExtra = extra.length;
  const needMem = needs[NEED_MEM]!;
  const needPack = needs[NEED_PACK]!;
  let fit = 0;
  let best = -1;
  let bAvoid = 0;
  let bExisting = 0;
  let bPack = 0;
  let bMem = 0;
  let bCached = 0;
  for (let c = 0; c < cand.length; c++) {
    // The two columns every decision tests are also the ranking keys: one load each.
    const mem = mems[c]!;
    const pack = packs[c]!;
    if (mem < needMem || pack < needPack || (nExtra !== 0 && !extraFit(extra, extraNeeds, c))) continue;
    const pos = cand[c]!;
    fit++;
    // The node object is read only when a rule needs its id: loading one per candidate
    // is a cache miss per node on a large fleet.
    const a = avoidKey(avoid, nodes, pos);
    const e = existingKey(existing, counts, nodes, pos);
    const k = file === undefined ? 0 : cachedKey(nodes[pos]!, file);
    if (best >= 0) {
      if (a !== bAvoid) {
        if (a > bAvoid) continue;
      } else if (e !== bExisting) {
        if (e > bExisting) continue;
      } else if (pack !== bPack) {
        if (pack > bPack) continue;
      } else if (mem !== bMem) {
        if (mem > bMem) continue;
      } else if (k !== bCached) {
        if (k > bCached) continue;
      } else if (idRank.length !== 0 ? idRank[pos]! > idRank[cand[best]!]! : !(nodes[pos]!.id < nodes[cand[best]!]!.id)) {
        continue;
      }
    }
    best = c;
    bAvoid = a;
    bExisting = e;
    bPack = pack;
    bMem = mem;
    bCached = k;
  }
  BEST[B_FIT] = fit;
  BEST[B_AVOID] = bAvoid;
  BEST[B_EXISTING] = bExisting;
  BEST[B_CACHED] = bCached;
  return best;
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
