import type { Profile } from '@llmgw/shared';
import type { NodeSnapshot, PlacementNote, Rejection, Reservation } from '../snapshot.js';
import { CHECKS, GPU_CHECK, MEMORY_CHECK, planFor, type Check, type DynamicCheck, type Plan } from './checks.js';
import { classOk, poolOf, requirementOf, type Requirement } from './requirement.js';
import { touchPool, updateTree, type BestTree, type PoolCache } from './best.js';
import { addReservation, indexReservations, type NodeUsage, type ReservationIndex } from './reservations.js';

/**
 * The fleet: one snapshot prepared for many decisions. A node that fails a static check
 * fails it for every replica placed over the same snapshot, so a profile's view works
 * out the static verdicts once, and each decision runs only the dynamic checks, on the
 * nodes that passed, over typed arrays that `reserve` keeps current. Every node is still
 * judged for every replica (no sampling); the verdicts that cannot change are
 * remembered, not skipped.
 */

/** Positions in `ProfileView.needs`. */
export const NEED_MEM = 0;
export const NEED_PACK = 1;

// The views hold these two columns as an Int32Array and a Float64Array whatever the
// checks declare: a change to either declaration must change the views too.
if (GPU_CHECK.column !== 'count' || MEMORY_CHECK.column !== 'amount')
  throw new Error('placement: the GPU column must count and the memory column hold amounts (fleet.ts)');

/** What is left of one resource, per candidate: see `DynamicCheck.column`. */
export type Column = Int32Array | Float64Array;

function columnFor(check: DynamicCheck, n: number): Column {
  return check.column === 'count' ? new Int32Array(n) : new Float64Array(n);
}

/** Static verdicts of one profile over a fleet, worked out once. */
export interface ProfileView {
  req: Requirement;
  plan: Plan;
  /** Positions of the nodes that pass the static checks; grouped by pool when sharded. */
  cand: Int32Array;
  /**
   * Per candidate, what is left of GPUs and of memory, kept current by `reserve`: every
   * decision tests and ranks by these two (select.ts), applying or not. What the profile
   * needs of each (`needs[NEED_MEM]`, `needs[NEED_PACK]`) is -Infinity when its check does
   * not apply, which every candidate passes, so the hot loop tests both without a branch
   * on whether they apply. The needs sit in a typed array, not in number fields, so the
   * loop always reads them as doubles: a field holding a small integer for one profile
   * and -Infinity for another changes how V8 stores it, and V8 then throws away the
   * loop's optimised code. The two columns are fields of their own, not entries of one
   * list, for the same reason: a list holding an Int32Array and a Float64Array made every
   * access to it polymorphic, and V8 deoptimised the view's build over and over.
   */
  pack: Int32Array;
  mem: Float64Array;
  needs: Float64Array;
  /** The other dynamic checks that apply (`plan.extra`), their columns and needs. */
  extraChecks: DynamicCheck[];
  extra: Column[];
  extraNeeds: Float64Array;
  /** Sharded: candidates of pool p are cand[poolStart[p]] .. cand[poolStart[p + 1] - 1]. */
  poolStart: Int32Array;
  poolName: string[];
  /** Candidate positions in ascending order, for explaining in node order. */
  inOrder: Int32Array;
  /** By position: the candidate index, or -1 for a node that fails statically. */
  candAt: Int32Array;
  /** The explanation of the nodes that fail statically, built on first need (explain.ts). */
  fixed: FixedExplanation | undefined;
  /** The notes of nodes not chosen, built on first need (explain.ts). */
  quiet: QuietNotes | undefined;
  /** The best candidate kept current (best.ts), built by the first decision that can use it (select.ts). */
  best: BestTree | undefined;
  /** Sharded: what each pool's last scan found (best.ts), kept by the decisions that can use it (sharded.ts). */
  pools: PoolCache | undefined;
}

/**
 * What the checks could not check on each node, for a node that was not chosen (so has
 * no GPUs picked): it depends only on the node and the profile, so it is worked out once
 * per view, and explaining walks the few nodes that have notes instead of every node.
 */
export interface QuietNotes {
  /** Ascending positions of the nodes with notes. */
  positions: Int32Array;
  /** By position: that node's notes; undefined for nodes without. */
  byNode: (PlacementNote[] | undefined)[];
}

/**
 * The explanation of the nodes that fail a profile statically. Their verdict cannot
 * change, but their reasons can: another profile's replica may reserve memory there.
 * `reserve` marks such nodes stale and explain rebuilds just those.
 */
export interface FixedExplanation {
  /**
   * Every failing reason of every node that fails statically, in node order, in one list:
   * explaining copies a run of it rather than walking a list per node.
   */
  flat: Rejection[];
  /** By position, plus one: node p's reasons are flat[start[p]] .. flat[start[p + 1] - 1]. */
  start: Int32Array;
  /** By position: that node's summary slot. */
  cat: Int32Array;
  /** Static failures per summary slot. */
  counts: number[];
  /** Sharded: every pool, in order of first appearance. */
  pools: string[];
  stale: number[];
}

/**
 * An inventory snapshot and the reservations on it, prepared for placing replicas one
 * after another: `placeOnFleet` decides, `reserve` records what a decision holds. The
 * reconciler keeps one for a tick; `placeMany` and `place` build their own.
 * Treat it as opaque; it must not outlive the snapshot it was built from. Outcomes of
 * one fleet may share Rejection objects (a static failure is explained once), so treat
 * outcomes as read-only.
 */
export interface Fleet {
  readonly nodes: readonly NodeSnapshot[];
  /** The checks its decisions run: CHECKS, or a test's own table. */
  readonly checks: readonly Check[];
  readonly index: ReservationIndex;
  /** By position, the same objects as `index`. */
  readonly usage: (NodeUsage | undefined)[];
  /** Model name → shards of it by position, for spreading. */
  readonly modelCount: Map<string, Int32Array>;
  /** Static verdicts per profile object. */
  readonly views: Map<Profile, ProfileView>;
  positions: Map<string, number> | undefined;
  /** By position, the rank of the node id among all ids: the tie-break without string compares. */
  idRank: Int32Array;
  decisions: number;
  /** By position, the class every GPU of the node has; '' when it has none or several; undefined until asked (`oneClassOf`). */
  oneClass: (string | undefined)[] | undefined;
}

/**
 * `idRank` until the ids are ranked: empty, rather than undefined, so the field holds
 * one type for the fleet's life and code optimised before the ranking stays valid after.
 */
export const UNRANKED = new Int32Array(0);

/**
 * Prepares `nodes` and the reservations already on them for a series of decisions, under
 * the checks table `checks` (a test may bring its own, for a kind of check CHECKS lacks).
 */
export function prepareFleet(nodes: readonly NodeSnapshot[], reservations: Iterable<Reservation> = [], checks: readonly Check[] = CHECKS): Fleet {
  const n = nodes.length;
  const index = indexReservations(reservations);
  const usage = new Array<NodeUsage | undefined>(n).fill(undefined);
  const modelCount = new Map<string, Int32Array>();
  if (index.size > 0) {
    for (let i = 0; i < n; i++) {
      const node = nodes[i];
      if (node === undefined) continue;
      const u = index.get(node.id);
      if (u === undefined) continue;
      usage[i] = u;
      for (const [model, count] of u.models) countsOf(modelCount, model, n)[i] = count;
    }
  }
  return { nodes, checks, index, usage, modelCount, views: new Map(), positions: undefined, idRank: UNRANKED, decisions: 0, oneClass: undefined };
}

/** Ranks node ids once, so ties between identical machines compare two integers. */
export function rankIds(nodes: readonly NodeSnapshot[]): Int32Array {
  const order = Array.from(nodes.keys());
  // `order` holds the positions of `nodes`.
  order.sort((a, b) => (nodes[a]!.id < nodes[b]!.id ? -1 : nodes[a]!.id > nodes[b]!.id ? 1 : 0));
  const rank = new Int32Array(nodes.length);
  order.forEach((pos, r) => (rank[pos] = r));
  return rank;
}

/**
 * Shards of `model` by position, created (all zero) on first ask: a decision reads one
 * typed array whether or not the model has replicas yet, so the pick loop sees one type.
 */
export function modelCounts(fleet: Fleet, model: string): Int32Array {
  return countsOf(fleet.modelCount, model, fleet.nodes.length);
}

function countsOf(modelCount: Map<string, Int32Array>, model: string, n: number): Int32Array {
  let counts = modelCount.get(model);
  if (counts === undefined) {
    counts = new Int32Array(n);
    modelCount.set(model, counts);
  }
  return counts;
}

/**
 * Records reservations on the fleet (normally `reservationsFor` a decision it made).
 * Mutates the fleet: the next decision sees them.
 */
export function reserve(fleet: Fleet, reservations: Iterable<Reservation>): void {
  let positions = fleet.positions;
  if (positions === undefined) {
    positions = new Map();
    for (let i = 0; i < fleet.nodes.length; i++) positions.set(fleet.nodes[i]!.id, i);
    fleet.positions = positions;
  }
  for (const r of reservations) {
    const pos = positions.get(r.nodeId);
    if (pos === undefined) {
      addReservation(fleet.index, r);
      continue;
    }
    // `pos` comes from `positions`, so it indexes the nodes and every by-position array;
    // `c` is a candidate of the view, so it indexes each of its columns, and `extra` has
    // one column per `extraChecks`. The columns are lowered first: `taken` compares with
    // the usage before `r`.
    const node = fleet.nodes[pos]!;
    const before = fleet.usage[pos];
    for (const view of fleet.views.values()) {
      const c = view.candAt[pos]!;
      if (c < 0) {
        view.fixed?.stale.push(pos);
        continue;
      }
      const req = view.req;
      view.mem[c] = view.mem[c]! - MEMORY_CHECK.taken(node, r, before, req);
      view.pack[c] = view.pack[c]! - GPU_CHECK.taken(node, r, before, req);
      const { extraChecks, extra } = view;
      for (let k = 0; k < extraChecks.length; k++) extra[k]![c] = extra[k]![c]! - extraChecks[k]!.taken(node, r, before, req);
    }
    fleet.usage[pos] = addReservation(fleet.index, r);
    const counts = countsOf(fleet.modelCount, r.model, fleet.nodes.length);
    counts[pos] = counts[pos]! + 1;
    // The columns and counts are current: the trees replay the node's path.
    for (const view of fleet.views.values()) {
      const c = view.candAt[pos]!;
      if (c < 0) continue;
      if (view.best !== undefined) updateTree(view.best, c);
      if (view.pools !== undefined) touchPool(view.pools, c);
    }
  }
}

/**
 * The class every GPU of node `i` has ('' when none or several), worked out on first need
 * and kept in `Fleet.oneClass`: one walk over a node's GPUs for all the views.
 */
function oneClassOf(fleet: Fleet, i: number): string {
  const known = (fleet.oneClass ??= new Array<string | undefined>(fleet.nodes.length).fill(undefined));
  let one = known[i];
  if (one !== undefined) return one;
  // `i` is a position of the fleet's nodes.
  const gpus = fleet.nodes[i]!.gpus;
  one = gpus[0]?.class ?? '';
  // Indexed: every GPU of the node.
  for (let k = 1; k < gpus.length; k++) if (gpus[k]!.class !== one) one = '';
  known[i] = one;
  return one;
}

/** The view of `profile` over the fleet, built on first use. */
export function viewOf(fleet: Fleet, profile: Profile): ProfileView {
  const known = fleet.views.get(profile);
  if (known !== undefined) return known;
  const req = requirementOf(profile);
  const plan = planFor(req, fleet.checks);
  // The static checks' `fits`, read out once: the checks are objects of different shapes,
  // and reading `fits` off each per node was a megamorphic load that V8 does not inline.
  const statics = plan.statics.map((check) => check.fits);
  const nodes = fleet.nodes;
  const n = nodes.length;
  // -Infinity for a check the plan leaves out: not applying, or not in the fleet's table,
  // so the pick loops never test what the explanation would not explain.
  const needOf = (check: DynamicCheck): number => (plan.checks.includes(check) ? check.need(req) : -Infinity);
  const needMem = needOf(MEMORY_CHECK);
  const needPack = needOf(GPU_CHECK);
  const extraChecks = plan.extra;
  const extraNeeds = Float64Array.from(extraChecks, (check) => check.need(req));
  const byClass = req.gpus > 0 && req.classes !== undefined;
  const candAt = new Int32Array(n);
  let positions = new Int32Array(n);
  let pack = new Int32Array(n);
  let mem = new Float64Array(n);
  let extra = extraChecks.map((check) => columnFor(check, n));
  let count = 0;
  // A dynamic check a node fails with nothing reserved, it fails for good: the node is no
  // candidate. What is left with reservations is never more than with none, so the whole
  // capacity is worked out only for a check the node fails now. Each check is tested as
  // soon as its figure is known, so a node short of memory is not walked GPU by GPU.
  next: for (let i = 0; i < n; i++) {
    candAt[i] = -1;
    const node = nodes[i];
    if (node === undefined) continue;
    for (let s = 0; s < statics.length; s++) if (!statics[s]!(node, req)) continue next;
    const u = fleet.usage[i];
    const m = MEMORY_CHECK.left(node, u, req);
    if (m < needMem && (u === undefined || MEMORY_CHECK.left(node, undefined, req) < needMem)) continue;
    // A node whose GPUs are all of a class the profile does not accept has none that
    // serve it (`serves`): no walk over its GPUs, in each such view.
    const one = byClass ? oneClassOf(fleet, i) : '';
    const g = one !== '' && !classOk(req, one) ? 0 : GPU_CHECK.left(node, u, req);
    if (g < needPack && (u === undefined || GPU_CHECK.left(node, undefined, req) < needPack)) continue;
    // `extra` and `extraNeeds` have one entry per `extraChecks`; a value written for a node
    // that then fails is overwritten by the next candidate.
    for (let k = 0; k < extraChecks.length; k++) {
      const check = extraChecks[k]!;
      const left = check.left(node, u, req);
      if (left < extraNeeds[k]! && (u === undefined || check.left(node, undefined, req) < extraNeeds[k]!)) continue next;
      extra[k]![count] = left;
    }
    mem[count] = m;
    pack[count] = g;
    candAt[i] = count;
    positions[count++] = i;
  }
  positions = positions.slice(0, count);
  pack = pack.slice(0, count);
  mem = mem.slice(0, count);
  extra = extra.map((col) => col.slice(0, count));
  const inOrder = positions;
  const poolStart: number[] = [0];
  const poolName: string[] = [];
  if (req.shards > 1) {
    // Group candidates by pool, keeping node order within each.
    const byPool = new Map<string, number[]>();
    // c < count: `positions` and every column hold `count` candidates, positions index `nodes`.
    for (let c = 0; c < count; c++) {
      const key = poolOf(nodes[positions[c]!]!);
      const list = byPool.get(key);
      if (list === undefined) byPool.set(key, [c]);
      else list.push(c);
    }
    const grouped = new Int32Array(count);
    const groupedPack = new Int32Array(count);
    const groupedMem = new Float64Array(count);
    const groupedExtra = extraChecks.map((check) => columnFor(check, count));
    let k = 0;
    for (const [name, list] of byPool) {
      poolName.push(name);
      for (const c of list) {
        const pos = positions[c]!;
        grouped[k] = pos;
        groupedPack[k] = pack[c]!;
        groupedMem[k] = mem[c]!;
        for (let d = 0; d < extra.length; d++) groupedExtra[d]![k] = extra[d]![c]!;
        candAt[pos] = k++;
      }
      poolStart.push(k);
    }
    positions = grouped;
    pack = groupedPack;
    mem = groupedMem;
    extra = groupedExtra;
  }
  const view: ProfileView = {
    req,
    plan,
    cand: positions,
    inOrder,
    pack,
    mem,
    needs: Float64Array.of(needMem, needPack),
    extraChecks,
    extra,
    extraNeeds,
    poolStart: Int32Array.from(poolStart),
    poolName,
    candAt,
    fixed: undefined,
    quiet: undefined,
    best: undefined,
    pools: undefined,
  };
  fleet.views.set(profile, view);
  return view;
}
