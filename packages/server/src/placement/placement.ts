import { formatGb, gbToMb, mbToGb } from '@llmgw/shared';
import type { GpuReport, Model, Profile } from '@llmgw/shared';
import type {
  NodeSnapshot,
  Placement,
  PlacementProfile,
  PlacementNote,
  PlacementOutcome,
  PlannedShard,
  Rejection,
  Reservation,
} from '../snapshot.js';

/**
 * Placement (DESIGN §3): a pure function from an inventory snapshot, the reservations of
 * replicas already placed and a model to a decision, or to the reasons there is none.
 *
 * The checks split in two. *Static* ones depend only on the snapshot: liveness, admin
 * state, labels, fabric, enough GPUs of the right class, size and health, enough memory
 * in total. *Dynamic* ones depend on reservations: free memory, free GPUs. A node that
 * fails a static check fails it for every replica placed over the same snapshot, so a
 * `Fleet` works out the static verdicts once per profile, and each decision runs only
 * the dynamic checks, on the nodes that passed, over typed arrays that `reserve` keeps
 * current. Every node is still judged for every replica (no sampling); the verdicts
 * that cannot change are remembered, not skipped.
 *
 * Explaining is a separate, slower pass, run only for a profile that does not fit (or
 * when asked): `evaluate` runs every check on a node and records every failure as a
 * Rejection. Reasons are strings built only here, never for nodes that pass.
 */

/** Nodes that report no pool are grouped as this pool for sharded profiles. */
export const DEFAULT_POOL = 'default';

// ---------------------------------------------------------------------------------------
// Reservations

/** What the replicas already placed hold on one node. */
export interface NodeUsage {
  memoryMb: number;
  gpuUuids: Set<string>;
  /** Distinct replicas with a shard here (for "48 reserved by 2 replicas"). */
  replicas: Set<string>;
  /** Shards per model name, for spreading a model's replicas. */
  models: Map<string, number>;
}

/** Node id → what is held there. */
export type ReservationIndex = Map<string, NodeUsage>;

/** Sums reservations per node, so each node costs one lookup rather than a scan. */
export function indexReservations(reservations: Iterable<Reservation>): ReservationIndex {
  const index: ReservationIndex = new Map();
  for (const r of reservations) addReservation(index, r);
  return index;
}

function addReservation(index: ReservationIndex, r: Reservation): NodeUsage {
  let u = index.get(r.nodeId);
  if (u === undefined) {
    u = { memoryMb: 0, gpuUuids: new Set(), replicas: new Set(), models: new Map() };
    index.set(r.nodeId, u);
  }
  u.memoryMb += r.memoryMb;
  for (const g of r.gpuUuids) u.gpuUuids.add(g);
  u.replicas.add(r.replicaId);
  u.models.set(r.model, (u.models.get(r.model) ?? 0) + 1);
  return u;
}

/** The reservations a placement holds once it is accepted: one per shard. */
export function reservationsFor(
  placement: Placement,
  replicaId: string,
  model: string,
): Reservation[] {
  const memoryMb = gbToMb(placement.profile.min_memory_gb ?? 0);
  return placement.shards.map((s) => ({
    replicaId,
    model,
    nodeId: s.nodeId,
    memoryMb,
    gpuUuids: s.gpuUuids,
  }));
}

// ---------------------------------------------------------------------------------------
// Inputs and outputs

/** Per-decision options, on top of the model and the snapshot. */
export interface PlaceOptions {
  /**
   * Node id → replicas of this model already there, for spreading. When absent it is
   * derived from the reservations (shards whose `model` is this model's name).
   */
  existingOnNode?: ReadonlyMap<string, number> | Readonly<Record<string, number>>;
  /** Nodes to avoid if anything else fits (a replica just failed there): soft. */
  avoidNodes?: readonly string[];
  /**
   * Also explain the profile that won: every failing reason of every node not chosen.
   * Off by default because nobody reads why a placed model was not placed elsewhere,
   * and building those strings would dominate the cost of a decision.
   */
  explainWinner?: boolean;
}

export interface PlaceInput extends PlaceOptions {
  /** From the catalog. */
  model: Model;
  /** The whole inventory. */
  nodes: readonly NodeSnapshot[];
  /** What replicas already placed hold (all models). */
  reservations: readonly Reservation[];
}

/** Per profile tried: the figures behind the one-line summary. */
export interface ProfileTally {
  profile: string;
  shards: number;
  /** Nodes evaluated. */
  nodes: number;
  /** Nodes that passed every node check. */
  fit: number;
  /** Failing nodes counted once each, by their most telling reason; largest first. */
  reasons: ReasonCount[];
  /** Sharded profiles that did not fit: fitting nodes per pool, largest first. */
  pools: { pool: string; fit: number }[];
}

export interface ReasonCount {
  count: number;
  /** Phrase after a count of 1, e.g. `lacks label role=coding`. */
  one: string;
  /** Phrase after a larger count, e.g. `lack label role=coding`. */
  many: string;
}

// ---------------------------------------------------------------------------------------
// Compiled profile

/**
 * Why a node failed, for the summary. A node is counted once, under its most telling
 * reason: the lowest category. Static mismatches (the node could never run the profile)
 * come before capacity it is short of right now, because "cordoned" or "lacks label" is
 * what the operator has to act on first; "too little memory" on a cordoned node is moot.
 * Label categories sit between draining and "without GPUs", one per selector entry.
 */
const CAT_NOT_READY = 0;
const CAT_CORDONED = 1;
const CAT_DRAINING = 2;
const CAT_LABEL = 3;
// Offsets after the label categories.
const OFF_NO_GPUS = 0;
const OFF_GPU_CLASS = 1;
const OFF_GPU_MEMORY = 2;
const OFF_FABRIC = 3;
const OFF_GPU_HEALTH = 4;
const OFF_GPU_COUNT = 5;
const OFF_MEMORY = 6;
const NO_CATEGORY = Number.MAX_SAFE_INTEGER;

interface Category {
  one: string;
  many: string;
}

interface Requirement {
  profile: Profile;
  gpus: number;
  /** Lower-cased class prefixes; undefined when any class will do. */
  classes: string[] | undefined;
  /** Memoises prefix matching per class string: a fleet has few distinct classes. */
  classCache: Map<string, boolean>;
  needGpuMb: number;
  needMemMb: number;
  /** The memory need is an estimate from the model file, not the catalog's figure. */
  memEstimated: boolean;
  selKeys: string[];
  selVals: string[];
  shards: number;
  /** Only checked when shards > 1: one node needs no interconnect. */
  fabric: string | undefined;
  /** Index of the first category after the label ones. */
  base: number;
  cats: Category[];
}

function same(s: string): Category {
  return { one: s, many: s };
}

function compile(profile: Profile): Requirement {
  const selector = profile.node_selector ?? {};
  const selKeys = Object.keys(selector);
  const selVals = selKeys.map((k) => selector[k]);
  const gpus = profile.gpus ?? 0;
  const shards = profile.shards ?? 1;
  const classes =
    gpus > 0 && profile.gpu_class !== undefined && profile.gpu_class.length > 0
      ? profile.gpu_class
      : undefined;
  const fabric = shards > 1 ? profile.fabric : undefined;
  const cats: Category[] = [same('not reporting'), same('cordoned'), same('draining')];
  for (let i = 0; i < selKeys.length; i++) {
    cats.push({
      one: `lacks label ${selKeys[i]}=${selVals[i]}`,
      many: `lack label ${selKeys[i]}=${selVals[i]}`,
    });
  }
  cats.push(
    same('without GPUs'),
    same(`without ${classes ? classes.join(' or ') : 'suitable'} GPUs`),
    same('too little GPU memory'),
    { one: `lacks fabric ${fabric ?? ''}`, many: `lack fabric ${fabric ?? ''}` },
    same('short of healthy GPUs'),
    same('too few free GPUs'),
    same('too little memory'),
  );
  return {
    profile,
    gpus,
    classes: classes?.map((c) => c.toLowerCase()),
    classCache: new Map(),
    needGpuMb: gpus > 0 && profile.min_gpu_memory_gb ? gbToMb(profile.min_gpu_memory_gb) : 0,
    needMemMb: profile.min_memory_gb ? gbToMb(profile.min_memory_gb) : 0,
    memEstimated: (profile as PlacementProfile).memory_estimated === true,
    selKeys,
    selVals,
    shards,
    fabric,
    base: CAT_LABEL + selKeys.length,
    cats,
  };
}

/** A class matches by prefix (`H100` accepts `H100-80GB`), ignoring case. */
function classOk(req: Requirement, cls: string): boolean {
  if (req.classes === undefined) return true;
  let ok = req.classCache.get(cls);
  if (ok === undefined) {
    const lower = cls.toLowerCase();
    ok = req.classes.some((p) => lower.startsWith(p));
    req.classCache.set(cls, ok);
  }
  return ok;
}

function gpuMemOk(req: Requirement, g: GpuReport): boolean {
  // Unknown GPU memory is not zero: as with host memory, the node stays eligible and the
  // decision carries a note instead.
  return req.needGpuMb === 0 || g.memory_total_mb === undefined || g.memory_total_mb >= req.needGpuMb;
}

/** Healthy and addressable: CUDA_VISIBLE_DEVICES needs the UUID. */
function healthy(g: GpuReport): boolean {
  return g.problems.length === 0 && g.uuid !== undefined;
}

/**
 * Could `g` serve a shard of `req`? For a CPU profile, which only counts GPUs to keep off
 * GPU machines, any addressable GPU counts, healthy or not: that saves reading every
 * GPU's problem list, and a broken GPU is no reason to prefer a machine for CPU work.
 */
function serves(req: Requirement, g: GpuReport): boolean {
  if (req.gpus === 0) return g.uuid !== undefined;
  return classOk(req, g.class) && gpuMemOk(req, g) && healthy(g);
}

// ---------------------------------------------------------------------------------------
// Static checks (no allocation, first failure ends it)

/**
 * The checks reservations cannot change. Returns how many GPUs could serve a shard
 * (see `serves`), or -1 when the node fails. Agrees with `evaluate` on a node with no
 * reservation.
 */
function staticFit(node: NodeSnapshot, req: Requirement): number {
  if (node.liveness !== 'ready' || node.admin !== 'ready') return -1;
  for (let k = 0; k < req.selKeys.length; k++) {
    if (node.labels[req.selKeys[k]] !== req.selVals[k]) return -1;
  }
  if (req.fabric !== undefined && !node.fabrics.includes(req.fabric)) return -1;
  if (req.needMemMb > 0 && node.memoryTotalMb !== undefined && node.memoryTotalMb < req.needMemMb) {
    return -1;
  }
  const gpus = node.gpus;
  if (gpus.length < req.gpus) return -1;
  let serving = 0;
  for (let i = 0; i < gpus.length; i++) if (serves(req, gpus[i])) serving++;
  return serving >= req.gpus ? serving : -1;
}

// ---------------------------------------------------------------------------------------
// Explaining one node (every check, every failure)

/** Where the explain pass records reasons. */
interface Detail {
  profile: string;
  pool: string | undefined;
  node: string;
  out: Rejection[];
  /** Lowest category seen for the current node. */
  cat: number;
}

function reject(
  d: Detail,
  cat: number,
  code: string,
  reason: string,
  requested?: number | string,
  available?: number | string,
): void {
  d.out.push({ profile: d.profile, pool: d.pool, node: d.node, code, reason, requested, available });
  if (cat < d.cat) d.cat = cat;
}

/** Runs every check of `req` on `node` and records every failure in `d`. True when it fits. */
function evaluate(node: NodeSnapshot, usage: NodeUsage | undefined, req: Requirement, d: Detail): boolean {
  const before = d.out.length;
  if (node.liveness !== 'ready') {
    reject(d, CAT_NOT_READY, 'not_ready', `has not reported for ${Math.round(node.lastSeenAgoS)}s`);
  }
  if (node.admin !== 'ready') {
    const why = node.adminReason ? ` (${node.adminReason})` : '';
    if (node.admin === 'cordoned') reject(d, CAT_CORDONED, 'cordoned', `is cordoned${why}`);
    else reject(d, CAT_DRAINING, 'draining', `is draining${why}`);
  }
  for (let k = 0; k < req.selKeys.length; k++) {
    const key = req.selKeys[k];
    const want = req.selVals[k];
    const have = node.labels[key];
    if (have === want) continue;
    if (have === undefined) {
      reject(d, CAT_LABEL + k, 'label', `lacks label ${key}=${want}`, `${key}=${want}`);
    } else {
      reject(
        d,
        CAT_LABEL + k,
        'label',
        `has label ${key}=${have}, needs ${key}=${want}`,
        `${key}=${want}`,
        `${key}=${have}`,
      );
    }
  }
  if (req.fabric !== undefined && !node.fabrics.includes(req.fabric)) {
    reject(
      d,
      req.base + OFF_FABRIC,
      'fabric',
      `lacks fabric ${req.fabric}`,
      req.fabric,
      node.fabrics.length > 0 ? node.fabrics.join(',') : undefined,
    );
  }
  if (req.needMemMb > 0 && node.memoryTotalMb !== undefined) {
    const reserved = usage === undefined ? 0 : usage.memoryMb;
    const free = node.memoryTotalMb - reserved;
    if (free < req.needMemMb) {
      const need = req.memEstimated ? `about ${formatGb(req.needMemMb)} GB (estimated from the GGUF)` : formatGb(req.needMemMb);
      const total = formatGb(node.memoryTotalMb);
      const n = usage === undefined ? 0 : usage.replicas.size;
      const reason =
        reserved > 0
          ? `has ${total} GB of memory, ${formatGb(reserved)} reserved by ${n} ${n === 1 ? 'replica' : 'replicas'}, needs ${need}`
          : `has ${total} GB of memory, needs ${need}`;
      reject(d, req.base + OFF_MEMORY, 'memory', reason, mbToGb(req.needMemMb), mbToGb(Math.max(0, free)));
    }
  }
  if (req.gpus > 0) explainGpus(node, usage?.gpuUuids, req, d);
  return d.out.length === before;
}

/** The GPU reasons of a node, if it is short of GPUs for `req`. */
function explainGpus(
  node: NodeSnapshot,
  held: Set<string> | undefined,
  req: Requirement,
  d: Detail,
): void {
  if (node.gpus.length === 0) {
    reject(d, req.base + OFF_NO_GPUS, 'gpu_count', 'has no GPUs', req.gpus, 0);
    return;
  }
  const nodeClasses: string[] = [];
  const eligible: GpuReport[] = [];
  let classMatches = 0;
  let largestMb = -1;
  for (const g of node.gpus) {
    if (!nodeClasses.includes(g.class)) nodeClasses.push(g.class);
    if (!classOk(req, g.class)) continue;
    classMatches++;
    if (g.memory_total_mb !== undefined && g.memory_total_mb > largestMb) largestMb = g.memory_total_mb;
    if (gpuMemOk(req, g)) eligible.push(g);
  }
  const profileClasses = req.profile.gpu_class ?? [];
  if (req.classes !== undefined && classMatches === 0) {
    reject(
      d,
      req.base + OFF_GPU_CLASS,
      'gpu_class',
      `has ${nodeClasses.join(' and ')} GPUs, needs ${profileClasses.join(' or ')}`,
      profileClasses.join(','),
      nodeClasses.join(','),
    );
    return;
  }
  if (eligible.length === 0) {
    reject(
      d,
      req.base + OFF_GPU_MEMORY,
      'gpu_memory',
      `has ${formatGb(largestMb)} GB GPUs, needs ${formatGb(req.needGpuMb)}`,
      mbToGb(req.needGpuMb),
      mbToGb(largestMb),
    );
    return;
  }
  let free = 0;
  const sick: GpuReport[] = [];
  const kinds: string[] = [];
  for (const g of eligible) {
    if (!kinds.includes(g.class)) kinds.push(g.class);
    if (g.uuid !== undefined && held !== undefined && held.has(g.uuid)) continue;
    if (healthy(g)) free++;
    else sick.push(g);
  }
  if (free >= req.gpus) return;
  // Unhealthy GPUs are named only when they are what makes the node short; on a node
  // that is short anyway they are noise.
  if (free + sick.length >= req.gpus) {
    for (const g of sick) {
      const problem = g.problems.length > 0 ? g.problems.join('; ') : 'no UUID reported';
      reject(d, req.base + OFF_GPU_HEALTH, 'gpu_health', `GPU ${g.index} is unhealthy: ${problem}`);
    }
  }
  const kind = kinds.join('/');
  const have =
    free === 0 ? `no free ${kind} GPUs` : `${free} free ${kind} ${free === 1 ? 'GPU' : 'GPUs'}`;
  reject(d, req.base + OFF_GPU_COUNT, 'gpu_count', `has ${have}, needs ${req.gpus}`, req.gpus, free);
}

// ---------------------------------------------------------------------------------------
// The fleet: one snapshot prepared for many decisions

/** Static verdicts of one profile over a fleet, worked out once. */
interface ProfileView {
  req: Requirement;
  /** Positions of the nodes that pass the static checks; grouped by pool when sharded. */
  cand: Int32Array;
  /** Per candidate, GPUs that could serve a shard (see `serves`) and are not reserved; kept current by `reserve`. */
  free: Int32Array;
  /** Sharded: candidates of pool p are cand[poolStart[p]] .. cand[poolStart[p + 1] - 1]. */
  poolStart: Int32Array;
  poolName: string[];
  /** Candidate positions in ascending order, for explaining in node order. */
  inOrder: Int32Array;
  /** By position: the candidate index, or -1 for a node that fails statically. */
  candAt: Int32Array;
  /** The explanation of the nodes that fail statically, built on first need. */
  fixed: FixedExplanation | undefined;
}

/**
 * The explanation of the nodes that fail a profile statically. Their verdict cannot
 * change, but their reasons can: another profile's replica may reserve memory there.
 * `reserve` marks such nodes stale and `fixedOf` rebuilds just those.
 */
interface FixedExplanation {
  /** By position: every failing reason of a node that fails statically. */
  byNode: (Rejection[] | undefined)[];
  /** By position: that node's summary category. */
  cat: Int32Array;
  /** Static failures per summary category. */
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
  /** By position, memory not reserved; Infinity where the agent did not report memory. */
  readonly memFree: Float64Array;
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
export function prepareFleet(
  nodes: readonly NodeSnapshot[],
  reservations: Iterable<Reservation> = [],
): Fleet {
  const n = nodes.length;
  const memFree = new Float64Array(n);
  for (let i = 0; i < n; i++) memFree[i] = nodes[i].memoryTotalMb ?? Infinity;
  const index = indexReservations(reservations);
  const usage = new Array<NodeUsage | undefined>(n).fill(undefined);
  const modelCount = new Map<string, Int32Array>();
  if (index.size > 0) {
    for (let i = 0; i < n; i++) {
      const u = index.get(nodes[i].id);
      if (u === undefined) continue;
      usage[i] = u;
      memFree[i] -= u.memoryMb;
      for (const [model, count] of u.models) countsOf(modelCount, model, n)[i] = count;
    }
  }
  return {
    nodes,
    index,
    usage,
    memFree,
    modelCount,
    views: new Map(),
    positions: undefined,
    idRank: undefined,
    decisions: 0,
  };
}

/** Ranks node ids once, so ties between identical machines compare two integers. */
function rankIds(nodes: readonly NodeSnapshot[]): Int32Array {
  const order = Array.from(nodes.keys());
  order.sort((a, b) => (nodes[a].id < nodes[b].id ? -1 : nodes[a].id > nodes[b].id ? 1 : 0));
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
    for (let i = 0; i < fleet.nodes.length; i++) positions.set(fleet.nodes[i].id, i);
    fleet.positions = positions;
  }
  for (const r of reservations) {
    const pos = positions.get(r.nodeId);
    const had = pos === undefined ? undefined : fleet.usage[pos]?.gpuUuids;
    const fresh = had === undefined ? r.gpuUuids : r.gpuUuids.filter((g) => !had.has(g));
    const u = addReservation(fleet.index, r);
    if (pos === undefined) continue;
    fleet.usage[pos] = u;
    fleet.memFree[pos] -= r.memoryMb;
    countsOf(fleet.modelCount, r.model, fleet.nodes.length)[pos]++;
    for (const view of fleet.views.values()) {
      const c = view.candAt[pos];
      if (c < 0) {
        view.fixed?.stale.push(pos);
        continue;
      }
      if (fresh.length === 0) continue;
      for (const g of fleet.nodes[pos].gpus) {
        if (g.uuid !== undefined && fresh.includes(g.uuid) && serves(view.req, g)) view.free[c]--;
      }
    }
  }
}

function poolOf(node: NodeSnapshot): string {
  return node.pool ?? DEFAULT_POOL;
}

function viewOf(fleet: Fleet, profile: Profile): ProfileView {
  const known = fleet.views.get(profile);
  if (known !== undefined) return known;
  const req = compile(profile);
  const nodes = fleet.nodes;
  const candAt = new Int32Array(nodes.length);
  let count = 0;
  let positions = new Int32Array(nodes.length);
  let free = new Int32Array(nodes.length);
  for (let i = 0; i < nodes.length; i++) {
    const serving = staticFit(nodes[i], req);
    candAt[i] = serving < 0 ? -1 : count;
    if (serving < 0) continue;
    positions[count] = i;
    free[count++] = serving - heldServing(nodes[i], fleet.usage[i], req);
  }
  positions = positions.slice(0, count);
  free = free.slice(0, count);
  const inOrder = positions;
  const poolStart: number[] = [0];
  const poolName: string[] = [];
  if (req.shards > 1) {
    // Group candidates by pool, keeping node order within each.
    const byPool = new Map<string, number[]>();
    for (let c = 0; c < count; c++) {
      const key = poolOf(nodes[positions[c]]);
      const list = byPool.get(key);
      if (list === undefined) byPool.set(key, [c]);
      else list.push(c);
    }
    const grouped = new Int32Array(count);
    const groupedFree = new Int32Array(count);
    let k = 0;
    for (const [name, list] of byPool) {
      poolName.push(name);
      for (const c of list) {
        grouped[k] = positions[c];
        groupedFree[k] = free[c];
        candAt[positions[c]] = k++;
      }
      poolStart.push(k);
    }
    positions = grouped;
    free = groupedFree;
  }
  const view: ProfileView = {
    req,
    cand: positions,
    inOrder,
    free,
    poolStart: Int32Array.from(poolStart),
    poolName,
    candAt,
    fixed: undefined,
  };
  fleet.views.set(profile, view);
  return view;
}

/** Serving GPUs of `node` already reserved. */
function heldServing(node: NodeSnapshot, usage: NodeUsage | undefined, req: Requirement): number {
  if (usage === undefined || usage.gpuUuids.size === 0) return 0;
  let held = 0;
  for (const g of node.gpus) if (g.uuid !== undefined && usage.gpuUuids.has(g.uuid) && serves(req, g)) held++;
  return held;
}

// ---------------------------------------------------------------------------------------
// Choosing among fitting nodes

/**
 * The selection rule, compared field by field, lowest first:
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
 * 5. node id, so the same inputs always give the same answer, whatever the input order.
 */
interface Candidate {
  pos: number;
  /** Index into the view's candidate arrays. */
  c: number;
  node: NodeSnapshot;
  avoid: number;
  existing: number;
  pack: number;
  mem: number;
}

function before(a: Candidate, b: Candidate): boolean {
  if (a.avoid !== b.avoid) return a.avoid < b.avoid;
  if (a.existing !== b.existing) return a.existing < b.existing;
  if (a.pack !== b.pack) return a.pack < b.pack;
  if (a.mem !== b.mem) return a.mem < b.mem;
  return a.node.id < b.node.id;
}

function blank(): Candidate {
  return { pos: -1, c: -1, node: undefined as unknown as NodeSnapshot, avoid: 0, existing: 0, pack: 0, mem: 0 };
}

interface Context {
  /** Replicas of this model by node id, when the caller says; else `counts`. */
  existing: ReadonlyMap<string, number> | undefined;
  /** Replicas of this model by position, from the reservations. */
  counts: Int32Array | undefined;
  avoid: ReadonlySet<string> | undefined;
}

/**
 * The dynamic checks on candidate `c` of `view`; on a fit, fills `out` with its ranking
 * keys. The same test as `evaluate` for a node that passed `staticFit`.
 */
function dynamicFit(fleet: Fleet, view: ProfileView, c: number, ctx: Context, out: Candidate): boolean {
  const req = view.req;
  const pos = view.cand[c];
  const freeMem = fleet.memFree[pos];
  if (req.needMemMb > 0 && freeMem < req.needMemMb) return false;
  const free = view.free[c];
  if (free < req.gpus) return false;
  const node = fleet.nodes[pos];
  out.pos = pos;
  out.c = c;
  out.node = node;
  out.avoid = ctx.avoid !== undefined && ctx.avoid.has(node.id) ? 1 : 0;
  out.existing =
    ctx.existing !== undefined
      ? ctx.existing.get(node.id) ?? 0
      : ctx.counts === undefined
        ? 0
        : ctx.counts[pos];
  out.pack = free;
  out.mem = freeMem;
  return true;
}

interface Found {
  fit: number;
  chosen: Candidate[] | undefined;
  pool: string | undefined;
}

/**
 * One shard: the best fitting node, kept as we go, without sorting or collecting. This
 * is the hot loop of a decision, so it runs `dynamicFit` and `before` inline on locals;
 * the order is exactly `before`'s.
 */
function pickSingle(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const { cand, free } = view;
  const { memFree, nodes, idRank } = fleet;
  const needMem = view.req.needMemMb;
  const needGpus = view.req.gpus;
  const { avoid, existing, counts } = ctx;
  let fit = 0;
  let best = -1;
  let bAvoid = 0;
  let bExisting = 0;
  let bPack = 0;
  let bMem = 0;
  for (let c = 0; c < cand.length; c++) {
    const pos = cand[c];
    const mem = memFree[pos];
    if (needMem > 0 && mem < needMem) continue;
    const pack = free[c];
    if (pack < needGpus) continue;
    fit++;
    const a = avoid !== undefined && avoid.has(nodes[pos].id) ? 1 : 0;
    const e = existing !== undefined ? existing.get(nodes[pos].id) ?? 0 : counts !== undefined ? counts[pos] : 0;
    if (best >= 0) {
      if (a !== bAvoid) {
        if (a > bAvoid) continue;
      } else if (e !== bExisting) {
        if (e > bExisting) continue;
      } else if (pack !== bPack) {
        if (pack > bPack) continue;
      } else if (mem !== bMem) {
        if (mem > bMem) continue;
      } else if (idRank !== undefined ? idRank[pos] > idRank[cand[best]] : !(nodes[pos].id < nodes[cand[best]].id)) {
        continue;
      }
    }
    best = c;
    bAvoid = a;
    bExisting = e;
    bPack = pack;
    bMem = mem;
  }
  if (best < 0) return { fit, chosen: undefined, pool: undefined };
  const node = nodes[cand[best]];
  const chosen = { pos: cand[best], c: best, node, avoid: bAvoid, existing: bExisting, pack: bPack, mem: bMem };
  return { fit, chosen: [chosen], pool: node.pool };
}

/**
 * N shards on N distinct fitting nodes of one pool. Within a pool, nodes are ranked by
 * the rule above and the first N taken (rank 0 first). Among pools that can hold the
 * replica, the pool chosen has, in order: the fewest avoided nodes among those N, the
 * fewest replicas of this model on them (spread), the fewest fitting nodes (best fit:
 * keep the large pools whole for larger replicas), the fewest free GPUs on those N
 * (pack), then the lowest name.
 */
function pickSharded(fleet: Fleet, view: ProfileView, ctx: Context): Found {
  const n = view.req.shards;
  // top[0..k) is the current pool's best k candidates, in order; top[n] is scratch.
  const top = Array.from({ length: n + 1 }, blank);
  let fit = 0;
  let best: { pool: string; nodes: Candidate[]; score: number[] } | undefined;
  for (let p = 0; p < view.poolName.length; p++) {
    let k = 0;
    let poolFit = 0;
    for (let c = view.poolStart[p]; c < view.poolStart[p + 1]; c++) {
      const cand = top[n];
      if (!dynamicFit(fleet, view, c, ctx, cand)) continue;
      poolFit++;
      if (k === n && !before(cand, top[n - 1])) continue;
      // Insert in order, dropping the last when full.
      let i = k < n ? k++ : n - 1;
      top[n] = top[i];
      top[i] = cand;
      while (i > 0 && before(top[i], top[i - 1])) {
        const t = top[i - 1];
        top[i - 1] = top[i];
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
      avoid += top[i].avoid;
      existing += top[i].existing;
      pack += top[i].pack;
    }
    const score = [avoid, existing, poolFit, pack];
    const pool = view.poolName[p];
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
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i];
  return aName < bName;
}

/** Lowest indices first: deterministic, and what an operator reading nvidia-smi expects. */
function chooseGpus(fleet: Fleet, view: ProfileView, chosen: Candidate): GpuReport[] {
  const req = view.req;
  if (req.gpus === 0) return [];
  const held = fleet.usage[chosen.pos]?.gpuUuids;
  const free = chosen.node.gpus.filter((g) => serves(req, g) && !(held?.has(g.uuid as string) ?? false));
  free.sort((a, b) => a.index - b.index);
  return free.slice(0, req.gpus);
}

// ---------------------------------------------------------------------------------------
// Explaining a profile

const fmtGbFigure = (gb: number): string => formatGb(gbToMb(gb));

function nodeNotes(
  node: NodeSnapshot,
  req: Requirement,
  gpus: readonly GpuReport[],
  out: PlacementNote[],
): void {
  const profile = req.profile.name;
  if (req.needMemMb > 0 && node.memoryTotalMb === undefined) {
    out.push({
      profile,
      node: node.id,
      note: `memory unknown (agent did not report it); min_memory_gb ${fmtGbFigure(req.profile.min_memory_gb ?? 0)} not checked`,
    });
  }
  if (req.needGpuMb > 0) {
    for (const g of gpus) {
      if (g.memory_total_mb !== undefined) continue;
      out.push({
        profile,
        node: node.id,
        note: `GPU ${g.index} memory unknown (agent did not report it); min_gpu_memory_gb ${fmtGbFigure(req.profile.min_gpu_memory_gb ?? 0)} not checked`,
      });
    }
  }
}

function detailFor(req: Requirement, out: Rejection[]): Detail {
  return { profile: req.profile.name, pool: undefined, node: '', out, cat: NO_CATEGORY };
}

function poolLabel(node: NodeSnapshot, req: Requirement): string | undefined {
  return req.shards > 1 ? poolOf(node) : node.pool;
}

/** The static failures' reasons, once per view and then only for nodes gone stale. */
function fixedOf(fleet: Fleet, view: ProfileView): FixedExplanation {
  const nodes = fleet.nodes;
  const known = view.fixed;
  if (known !== undefined) {
    for (const pos of known.stale) {
      known.counts[known.cat[pos]]--;
      known.cat[pos] = explainNode(fleet, view, pos, (known.byNode[pos] = []));
      known.counts[known.cat[pos]]++;
    }
    known.stale.length = 0;
    return known;
  }
  const byNode = new Array<Rejection[] | undefined>(nodes.length).fill(undefined);
  const cat = new Int32Array(nodes.length);
  const counts = new Array<number>(view.req.cats.length).fill(0);
  const pools = new Set<string>();
  for (let i = 0; i < nodes.length; i++) {
    if (view.req.shards > 1) pools.add(poolOf(nodes[i]));
    if (view.candAt[i] >= 0) continue;
    cat[i] = explainNode(fleet, view, i, (byNode[i] = []));
    counts[cat[i]]++;
  }
  view.fixed = { byNode, cat, counts, pools: [...pools], stale: [] };
  return view.fixed;
}

/** Records the reasons node `pos` fails; returns its summary category. */
function explainNode(fleet: Fleet, view: ProfileView, pos: number, out: Rejection[]): number {
  const node = fleet.nodes[pos];
  const d = detailFor(view.req, out);
  d.node = node.id;
  d.pool = poolLabel(node, view.req);
  evaluate(node, fleet.usage[pos], view.req, d);
  return d.cat;
}

/**
 * Every node against every check of the profile, every failure kept, in node order.
 * Fitting nodes that were not chosen get their notes here. Returns the profile's tally.
 */
function explainProfile(
  fleet: Fleet,
  view: ProfileView,
  placed: boolean,
  chosen: ReadonlySet<string>,
  rejections: Rejection[],
  notes: PlacementNote[],
): ProfileTally {
  const req = view.req;
  const nodes = fleet.nodes;
  const sharded = req.shards > 1;
  const fixed = fixedOf(fleet, view);
  const counts = fixed.counts.slice();
  const poolFit = new Map<string, number>(fixed.pools.map((p) => [p, 0]));
  const d = detailFor(req, rejections);
  let fit = 0;
  const fitting = new Set<number>();
  // Node order: the static failures' rejections between candidates are copied as they are.
  let next = 0;
  const copyUpTo = (end: number): void => {
    for (let p = next; p < end; p++) {
      const rs = fixed.byNode[p];
      if (rs !== undefined) for (const r of rs) rejections.push(r);
    }
  };
  for (const i of view.inOrder) {
    copyUpTo(i);
    next = i + 1;
    const node = nodes[i];
    const pool = sharded ? poolOf(node) : undefined;
    d.node = node.id;
    d.pool = poolLabel(node, req);
    d.cat = NO_CATEGORY;
    if (evaluate(node, fleet.usage[i], req, d)) {
      fit++;
      fitting.add(i);
      if (pool !== undefined) poolFit.set(pool, (poolFit.get(pool) ?? 0) + 1);
      // Chosen nodes get their notes with their GPUs, where the decision is built.
      if (!chosen.has(node.id)) nodeNotes(node, req, [], notes);
    } else {
      counts[d.cat]++;
    }
  }
  copyUpTo(nodes.length);
  // A rejected node whose memory is unknown says so too: the operator fixing its other
  // problem should know memory was never checked.
  if (req.needMemMb > 0) {
    for (let i = 0; i < nodes.length; i++) {
      if (!fitting.has(i) && nodes[i].memoryTotalMb === undefined) nodeNotes(nodes[i], req, [], notes);
    }
  }
  const pools: { pool: string; fit: number }[] = [];
  if (sharded) {
    for (const [pool, n] of poolFit) if (n < req.shards) pools.push({ pool, fit: n });
    pools.sort((a, b) => b.fit - a.fit || (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : 0));
    for (const p of pools) {
      rejections.push({
        profile: req.profile.name,
        pool: p.pool,
        node: undefined,
        code: 'shards',
        reason: `pool ${p.pool}: fits ${p.fit} of ${req.shards} shards`,
        requested: req.shards,
        available: p.fit,
      });
    }
  }
  const reasons: ReasonCount[] = [];
  for (let c = 0; c < counts.length; c++) {
    if (counts[c] > 0) reasons.push({ count: counts[c], one: req.cats[c].one, many: req.cats[c].many });
  }
  // Stable sort: equal counts keep category order, the most telling first.
  reasons.sort((a, b) => b.count - a.count);
  return {
    profile: req.profile.name,
    shards: req.shards,
    nodes: nodes.length,
    fit,
    reasons,
    pools: placed ? [] : pools,
  };
}

// ---------------------------------------------------------------------------------------
// Summary and rendering

/** Pools named in a summary line; the rest are counted. */
const SUMMARY_POOLS = 3;

/**
 * The one-line summary of an attempt, from the tallies of the profiles tried (in order).
 *
 * Placed: `placed qwen-coder-14b on cpu-3 (profile cpu; 4/5 nodes fit)`, naming the
 * profiles that were tried first and did not fit. Not placed:
 * `0/5 nodes can run qwen-coder-14b: 3 too little memory, 1 cordoned, 1 lacks label role=coding`,
 * with the counts of the profile that came closest (most fitting nodes; the earlier
 * profile on a tie, so with nothing fitting it is the preferred one), and the profile
 * named when the model has more than one.
 */
export function summarize(
  modelName: string,
  tallies: readonly ProfileTally[],
  placement?: Placement,
): string {
  if (placement !== undefined) {
    const won = tallies[tallies.length - 1];
    const where = placement.shards.map((s) => s.nodeId).join(', ');
    const pool = placement.shards.length > 1 && placement.pool ? ` in pool ${placement.pool}` : '';
    const earlier = tallies.slice(0, -1).map((t) => t.profile);
    const after = earlier.length > 0 ? `; ${earlier.join(', ')} did not fit` : '';
    const fit = won ? `; ${won.fit}/${won.nodes} nodes fit` : '';
    return `placed ${modelName} on ${where}${pool} (profile ${placement.profile.name}${fit}${after})`;
  }
  if (tallies.length === 0) return `${modelName} has no profiles to place`;
  let best = tallies[0];
  for (const t of tallies) if (t.fit > best.fit) best = t;
  if (best.nodes === 0) return `0/0 nodes can run ${modelName}: no nodes in the inventory`;
  const which = tallies.length > 1 ? ` (profile ${best.profile})` : '';
  const parts = best.reasons.map((r) => `${r.count} ${r.count === 1 ? r.one : r.many}`);
  let line = `${best.fit}/${best.nodes} nodes can run ${modelName}${which}`;
  if (parts.length > 0) line += `: ${parts.join(', ')}`;
  if (best.shards > 1) {
    const named = best.pools
      .slice(0, SUMMARY_POOLS)
      .map((p) => `pool ${p.pool}: fits ${p.fit} of ${best.shards} shards`);
    const more = best.pools.length - named.length;
    if (more > 0) named.push(`${more} more ${more === 1 ? 'pool' : 'pools'}`);
    if (named.length === 0) named.push(`no pool has ${best.shards} fitting nodes`);
    line += `${parts.length > 0 ? ';' : ':'} ${named.join(', ')}`;
  }
  return line;
}

/** One rejection as a line of text: `node-7: has 8 GB of memory, needs 24`. */
export function renderRejection(r: Rejection): string {
  return r.node !== undefined ? `${r.node}: ${r.reason}` : r.reason;
}

// ---------------------------------------------------------------------------------------
// Entry points

function toMap(
  m: ReadonlyMap<string, number> | Readonly<Record<string, number>> | undefined,
): ReadonlyMap<string, number> | undefined {
  if (m === undefined) return undefined;
  if (m instanceof Map) return m;
  return new Map(Object.entries(m as Record<string, number>));
}

/**
 * Places one replica of `model`: tries its profiles in order and returns the first that
 * fits, with the rejections of the profiles tried before it (they say why the preferred
 * profile was not used), or, when none fits, the rejections of every profile.
 */
export function place(input: PlaceInput): PlacementOutcome {
  return placeOnFleet(prepareFleet(input.nodes, input.reservations), input.model, input);
}

/**
 * `place` over a prepared fleet. Reads the fleet (and remembers static verdicts in it);
 * call `reserve` with `reservationsFor` the placement to make the next decision see it.
 */
export function placeOnFleet(fleet: Fleet, model: Model, options: PlaceOptions = {}): PlacementOutcome {
  // Ranking the ids costs a sort: worth it from the second decision over a fleet on.
  if (fleet.decisions++ === 1) fleet.idRank = rankIds(fleet.nodes);
  const ctx: Context = {
    counts: fleet.modelCount.get(model.name),
    existing: toMap(options.existingOnNode),
    avoid: options.avoidNodes && options.avoidNodes.length > 0 ? new Set(options.avoidNodes) : undefined,
  };
  const rejections: Rejection[] = [];
  const notes: PlacementNote[] = [];
  const tallies: ProfileTally[] = [];
  for (const profile of model.profiles) {
    const view = viewOf(fleet, profile);
    const found = view.req.shards > 1 ? pickSharded(fleet, view, ctx) : pickSingle(fleet, view, ctx);
    const chosen = found.chosen;
    if (chosen === undefined || options.explainWinner) {
      const ids = new Set(chosen?.map((c) => c.node.id) ?? []);
      tallies.push(explainProfile(fleet, view, chosen !== undefined, ids, rejections, notes));
    } else {
      tallies.push({
        profile: profile.name,
        shards: view.req.shards,
        nodes: fleet.nodes.length,
        fit: found.fit,
        reasons: [],
        pools: [],
      });
    }
    if (chosen === undefined) continue;
    const shards: PlannedShard[] = chosen.map((c, rank) => {
      const gpus = chooseGpus(fleet, view, c);
      nodeNotes(c.node, view.req, gpus, notes);
      return {
        nodeId: c.node.id,
        rank,
        gpuUuids: gpus.map((g) => g.uuid as string),
        gpuIndices: gpus.map((g) => g.index),
      };
    });
    const placement: Placement = {
      profile,
      pool: view.req.shards > 1 ? found.pool : chosen[0].node.pool,
      fabric: view.req.fabric,
      shards,
    };
    return { placement, rejections, notes, summary: summarize(model.name, tallies, placement) };
  }
  return { rejections, notes, summary: summarize(model.name, tallies) };
}

/** One replica to place in a batch. */
export interface PlacementRequest {
  model: Model;
  /** Names the reservations the placement makes ("reserved by 2 replicas"). */
  replicaId: string;
  avoidNodes?: readonly string[];
}

export interface PlaceManyInput {
  nodes: readonly NodeSnapshot[];
  reservations: readonly Reservation[];
  requests: readonly PlacementRequest[];
  explainWinner?: boolean;
}

export interface PlaceManyResult {
  /** One per request, in order. */
  outcomes: PlacementOutcome[];
  /** The reservations the placed replicas hold, in order; the input's are not repeated. */
  reservations: Reservation[];
}

/**
 * Places replicas one after another, each seeing what the previous ones reserved: what a
 * reconciler tick does when several models are short. Pure from the outside: it builds
 * its own fleet and extends it after each decision.
 */
export function placeMany(input: PlaceManyInput): PlaceManyResult {
  const fleet = prepareFleet(input.nodes, input.reservations);
  const outcomes: PlacementOutcome[] = [];
  const added: Reservation[] = [];
  for (const r of input.requests) {
    const outcome = placeOnFleet(fleet, r.model, { avoidNodes: r.avoidNodes, explainWinner: input.explainWinner });
    outcomes.push(outcome);
    if (outcome.placement !== undefined) {
      const held = reservationsFor(outcome.placement, r.replicaId, r.model.name);
      reserve(fleet, held);
      for (const h of held) added.push(h);
    }
  }
  return { outcomes, reservations: added };
}
