import type { Profile } from '@llmgw/shared';
import type { NodeSnapshot, PlacementNote, Rejection, Reservation } from '../snapshot.js';
import { DYNAMIC, GPU_COLUMN, MEMORY_COLUMN, planFor, type Plan } from './checks.js';
import { poolOf, requirementOf, type Requirement } from './requirement.js';
import { addReservation, indexReservations, type NodeUsage, type ReservationIndex } from './reservations.js';

/**
 * The fleet: one snapshot prepared for many decisions. A node that fails a static check
 * fails it for every replica placed over the same snapshot, so a profile's view works
 * out the static verdicts once, and each decision runs only the dynamic checks, on the
 * nodes that passed, over typed arrays that `reserve` keeps current. Every node is still
 * judged for every replica (no sampling); the verdicts that cannot change are
 * remembered, not skipped.
 */

/** Static verdicts of one profile over a fleet, worked out once. */
export interface ProfileView {
  req: Requirement;
  plan: Plan;
  /** Positions of the nodes that pass the static checks; grouped by pool when sharded. */
  cand: Int32Array;
  /** Per dynamic check (DYNAMIC order), per candidate: what is left; kept current by `reserve`. */
  cols: Float64Array[];
  /** The columns of the dynamic checks that apply, and what each needs (plan.tested, plan.needs). */
  tests: Float64Array[];
  needs: Float64Array;
  /**
   * The first two tests, for the hot loops: most profiles test one or two columns
   * (memory, GPUs). A missing one is a column of zeros needing 0, which every candidate
   * passes, so the loops test both without a branch on whether they exist.
   */
  test0: Float64Array;
  need0: number;
  test1: Float64Array;
  need1: number;
  /** The GPU and memory columns, which rank candidates (select.ts). */
  pack: Float64Array;
  mem: Float64Array;
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
  /** By position: every failing reason of a node that fails statically. */
  byNode: (Rejection[] | undefined)[];
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
  readonly index: ReservationIndex;
  /** By position, the same objects as `index`. */
  readonly usage: (NodeUsage | undefined)[];
  /** Model name → shards of it by position, for spreading. */
  readonly modelCount: Map<string, Int32Array>;
  /** Static verdicts per profile object. */
  readonly views: Map<Profile, ProfileView>;
  positions: Map<string, number> | undefined;
  /** By position, the rank of the node id among all ids: the tie-break without string compares. */
  idRank: Int32Array | undefined;
  decisions: number;
}

/** Prepares `nodes` and the reservations already on them for a series of decisions. */
export function prepareFleet(nodes: readonly NodeSnapshot[], reservations: Iterable<Reservation> = []): Fleet {
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
  return { nodes, index, usage, modelCount, views: new Map(), positions: undefined, idRank: undefined, decisions: 0 };
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
    // a view has one column per DYNAMIC check, and `c` is one of its candidates.
    // The columns are lowered first: `taken` compares with the usage before `r`.
    const node = fleet.nodes[pos]!;
    const before = fleet.usage[pos];
    for (const view of fleet.views.values()) {
      const c = view.candAt[pos]!;
      if (c < 0) {
        view.fixed?.stale.push(pos);
        continue;
      }
      for (let k = 0; k < DYNAMIC.length; k++) {
        const less = DYNAMIC[k]!.taken(node, r, before, view.req);
        if (less !== 0) view.cols[k]![c] = view.cols[k]![c]! - less;
      }
    }
    fleet.usage[pos] = addReservation(fleet.index, r);
    const counts = countsOf(fleet.modelCount, r.model, fleet.nodes.length);
    counts[pos] = counts[pos]! + 1;
  }
}

/** The view of `profile` over the fleet, built on first use. */
export function viewOf(fleet: Fleet, profile: Profile): ProfileView {
  const known = fleet.views.get(profile);
  if (known !== undefined) return known;
  const req = requirementOf(profile);
  const plan = planFor(req);
  const { statics, tested, needs } = plan;
  const nodes = fleet.nodes;
  const n = nodes.length;
  const candAt = new Int32Array(n);
  let positions = new Int32Array(n);
  let cols = DYNAMIC.map(() => new Float64Array(n));
  let count = 0;
  next: for (let i = 0; i < n; i++) {
    candAt[i] = -1;
    const node = nodes[i];
    if (node === undefined) continue;
    // `cols` and `whole` have one entry per DYNAMIC check, `tested` holds indices into
    // them and `needs` one entry per `tested`: the `!`s below are in range.
    for (let s = 0; s < statics.length; s++) if (!statics[s]!.fits(node, req)) continue next;
    const u = fleet.usage[i];
    for (let k = 0; k < DYNAMIC.length; k++) cols[k]![count] = DYNAMIC[k]!.left(node, u, req);
    // A dynamic check the node fails with nothing reserved, it fails for good. What is
    // left with reservations is never more than with none, so the whole capacity is
    // worked out only for a check the node fails now.
    for (let t = 0; t < tested.length; t++) {
      const k = tested[t]!;
      if (cols[k]![count]! >= needs[t]!) continue;
      if (u === undefined || DYNAMIC[k]!.left(node, undefined, req) < needs[t]!) continue next;
    }
    candAt[i] = count;
    positions[count++] = i;
  }
  positions = positions.slice(0, count);
  cols = cols.map((col) => col.slice(0, count));
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
    const groupedCols = cols.map(() => new Float64Array(count));
    let k = 0;
    for (const [name, list] of byPool) {
      poolName.push(name);
      for (const c of list) {
        const pos = positions[c]!;
        grouped[k] = pos;
        for (let d = 0; d < cols.length; d++) groupedCols[d]![k] = cols[d]![c]!;
        candAt[pos] = k++;
      }
      poolStart.push(k);
    }
    positions = grouped;
    cols = groupedCols;
  }
  const tests = Array.from(tested, (k) => cols[k]!);
  const none = new Float64Array(count);
  const view: ProfileView = {
    req,
    plan,
    cand: positions,
    inOrder,
    cols,
    tests,
    needs,
    test0: tests[0] ?? none,
    need0: needs[0] ?? 0,
    test1: tests[1] ?? none,
    need1: needs[1] ?? 0,
    // Every view has a column per DYNAMIC check, these two among them.
    pack: cols[GPU_COLUMN]!,
    mem: cols[MEMORY_COLUMN]!,
    poolStart: Int32Array.from(poolStart),
    poolName,
    candAt,
    fixed: undefined,
    quiet: undefined,
  };
  fleet.views.set(profile, view);
  return view;
}
