import type { NodeSnapshot } from '../snapshot.js';

/**
 * The selection rule, declared once: which of the nodes that fit a replica's profile
 * gets it. `RANKING` is an ordered list of keys, each a named function of a candidate
 * giving a number; candidates compare key by key, the first key on which they differ
 * decides, in that key's direction. Both pick loops run this list (select.ts for one
 * node, sharded.ts for the nodes of a pool, and `POOL_RANKING` there to choose among
 * pools), so changing the rule is changing the list, and nothing else.
 */

/**
 * What the keys read about a candidate of one decision: the profile view's candidates and
 * columns (fleet.ts), the fleet's nodes and id ranks, and the decision's context. Built
 * once per decision, always with these fields in this order, none of them a number, so
 * the object keeps one shape and V8 keeps the keys' optimised code.
 */
export interface RankInputs {
  readonly nodes: readonly NodeSnapshot[];
  /** Candidate index → node position. */
  readonly cand: Int32Array;
  /** Per candidate, free GPUs of the kind the profile counts (the GPU check's column). */
  readonly pack: Int32Array;
  /** Per candidate, host memory left, Infinity when unreported (the memory check's column). */
  readonly mem: Float64Array;
  /** By position, the rank of the node id among all ids; empty until the fleet ranks them. */
  readonly idRank: Int32Array;
  /** Nodes to avoid if anything else fits. */
  readonly avoid: ReadonlySet<string> | undefined;
  /** Replicas of this model by node id, when the caller says; else `counts`. */
  readonly existing: ReadonlyMap<string, number> | undefined;
  /** Replicas of this model by position, from the reservations. */
  readonly counts: Int32Array | undefined;
  /** The SHA-256 of the file the profile's agents fetch; undefined when none. */
  readonly file: string | undefined;
}

/** One key of a ranking: a figure of each candidate, and which end of it goes first. */
export interface RankKey<T> {
  readonly name: string;
  readonly prefer: 'lowest' | 'highest';
  /** The key's figure for candidate `c` of `inputs`; it reads nothing it does not need. */
  readonly of: (inputs: T, c: number) => number;
}

/**
 * 1. `avoid`: nodes in `avoidNodes` only as a last resort. A replica just failed there,
 *    and the same node straight away would likely fail the same way; first because
 *    nothing else matters if the replica does not start.
 */
export const AVOID: RankKey<RankInputs> = {
  name: 'avoid',
  prefer: 'lowest',
  // The node is read only when there is a set to look in.
  of: (r, c) => (r.avoid !== undefined && r.avoid.has(r.nodes[r.cand[c]!]!.id) ? 1 : 0),
};

/**
 * 2. `existing`: fewer replicas of this model already on the node. Spreading a model's
 *    replicas means one machine going away takes down as few of them as possible: the
 *    availability of a model comes before how tightly the fleet is packed.
 */
export const EXISTING: RankKey<RankInputs> = {
  name: 'existing',
  prefer: 'lowest',
  // From the caller's map when it gave one, else the reservations' counts (then the node
  // object is not read: a cache miss per candidate on a large fleet).
  of: (r, c) => (r.existing !== undefined ? (r.existing.get(r.nodes[r.cand[c]!]!.id) ?? 0) : r.counts !== undefined ? r.counts[r.cand[c]!]! : 0),
};

/**
 * 3. `pack`: best fit on GPUs. For a GPU profile, the fewest free GPUs of the accepted
 *    kind that still suffice, so partly used machines fill up and whole ones stay free
 *    for 8-GPU models. For a CPU profile, the fewest free GPUs of any kind, so CPU work
 *    goes to CPU machines (or GPU machines that are full) before idle GPU machines.
 *    Before memory because GPUs are the scarce resource a fleet is bought for.
 */
export const PACK: RankKey<RankInputs> = { name: 'pack', prefer: 'lowest', of: (r, c) => r.pack[c]! };

/**
 * 4. `mem`: best fit on host memory, the least free memory that still suffices, for the
 *    same reason as `pack` on the resource that comes second. A node that did not report
 *    memory counts as unlimited, so known fits go first.
 */
export const MEM: RankKey<RankInputs> = { name: 'mem', prefer: 'lowest', of: (r, c) => r.mem[c]! };

/**
 * 5. `cached`: for a profile whose source is a file agents fetch (files/README.md), a node
 *    whose agent already holds that file (by its SHA-256, from `NodeReport.files`), so the
 *    replica starts without a transfer: 0 when it holds it (or there is none to hold),
 *    else 1. After the keys above on purpose: the spread and the fit keep the fleet
 *    healthy, and a download is a delay that ends, so the file decides among nodes those
 *    keys leave equal (identical machines, the common case of a CPU fleet), never
 *    against them.
 */
export const CACHED: RankKey<RankInputs> = {
  name: 'cached',
  prefer: 'lowest',
  of: (r, c) => (r.file === undefined || r.nodes[r.cand[c]!]!.files?.has(r.file) === true ? 0 : 1),
};

/**
 * 6. `id`: the node id, so the same inputs always give the same answer, whatever their
 *    order. Last, as it says nothing about the node. Its figure is the id's rank among the
 *    fleet's ids (`Fleet.idRank`: two integers compared, not two strings); before the
 *    fleet has ranked them (its first decision) it is 0 for every node, and candidates
 *    equal on every key compare their ids as strings (`idBefore`), the order the ranks
 *    are made from.
 */
export const NODE_ID: RankKey<RankInputs> = {
  name: 'id',
  prefer: 'lowest',
  of: (r, c) => (r.idRank.length !== 0 ? r.idRank[r.cand[c]!]! : 0),
};

/** The selection rule: the keys in the order they decide. */
export const RANKING: readonly RankKey<RankInputs>[] = [AVOID, EXISTING, PACK, MEM, CACHED, NODE_ID];

/**
 * `of` of each key in `RANKING`, turned so the lowest figure goes first (a key that
 * prefers the highest is negated): the loops then compare one way only.
 */
export const RANK_VALUES: readonly ((r: RankInputs, c: number) => number)[] = lowestFirst(RANKING);

/** Where `key` sits in `ranking` (its figure's index in `Candidate.keys`). */
export function keyAt<T>(ranking: readonly RankKey<T>[], key: RankKey<T>): number {
  const at = ranking.indexOf(key);
  if (at < 0) throw new Error(`placement: the ranking has no key '${key.name}'`);
  return at;
}

/** `of` of each key, negated for one that prefers the highest. */
export function lowestFirst<T>(ranking: readonly RankKey<T>[]): ((inputs: T, c: number) => number)[] {
  return ranking.map((key) => {
    const of = key.of;
    return key.prefer === 'lowest' ? of : (inputs: T, c: number) => -of(inputs, c);
  });
}

/*
 * The pick loops call the keys' figures through the six constants below, each from a
 * call site of its own, rather than through a loop over `RANK_VALUES`: V8 inlines a call
 * site that has only ever called one function, and one that calls six is a plain call
 * each time, which doubled the cost of a decision (same run, 5,000 and 20,000 nodes).
 * A key added to `RANKING` needs a constant here and a line where they are called
 * (`rankValues`, `orderAgainst`, select.ts `bestFit`); the check makes that impossible to
 * miss.
 */
if (RANK_VALUES.length !== 6) throw new Error('placement: ranking.ts calls six ranking keys; RANKING has another number of them');
function slot(k: number): (r: RankInputs, c: number) => number {
  const figure = RANK_VALUES[k];
  if (figure === undefined) throw new Error(`placement: RANKING has no key ${k}`);
  return figure;
}
/** The figure of `RANKING[0]`, lowest first (`RANK_VALUES[0]`). */
export const F0 = slot(0);
/** The figure of `RANKING[1]`, lowest first (`RANK_VALUES[1]`). */
export const F1 = slot(1);
/** The figure of `RANKING[2]`, lowest first (`RANK_VALUES[2]`). */
export const F2 = slot(2);
/** The figure of `RANKING[3]`, lowest first (`RANK_VALUES[3]`). */
export const F3 = slot(3);
/** The figure of `RANKING[4]`, lowest first (`RANK_VALUES[4]`). */
export const F4 = slot(4);
/** The figure of `RANKING[5]`, lowest first (`RANK_VALUES[5]`). */
export const F5 = slot(5);

/** Every key's figure (lowest first) of candidate `c`, into `out` (one entry per key). */
export function rankValues(r: RankInputs, c: number, out: Float64Array): void {
  out[0] = F0(r, c);
  out[1] = F1(r, c);
  out[2] = F2(r, c);
  out[3] = F3(r, c);
  out[4] = F4(r, c);
  out[5] = F5(r, c);
}

/**
 * How candidate `c` compares with the figures `keys` (another candidate's, from
 * `rankValues`): -1 when `c` goes first, 1 when it goes after, 0 when equal on every key.
 * The first key they differ on decides, and the keys after it are not worked out.
 */
export function orderAgainst(r: RankInputs, c: number, keys: Float64Array): -1 | 0 | 1 {
  // `keys` has one entry per key.
  let v = F0(r, c);
  if (v !== keys[0]) return v < keys[0]! ? -1 : 1;
  v = F1(r, c);
  if (v !== keys[1]) return v < keys[1]! ? -1 : 1;
  v = F2(r, c);
  if (v !== keys[2]) return v < keys[2]! ? -1 : 1;
  v = F3(r, c);
  if (v !== keys[3]) return v < keys[3]! ? -1 : 1;
  v = F4(r, c);
  if (v !== keys[4]) return v < keys[4]! ? -1 : 1;
  v = F5(r, c);
  if (v !== keys[5]) return v < keys[5]! ? -1 : 1;
  return 0;
}

/**
 * How figures `a` and `b` (both from `lowestFirst`, one per key) compare: the first key
 * they differ on decides, -1 when `a` goes first, 1 when `b` does, 0 when equal on all.
 */
export function valuesOrder(a: Float64Array, b: Float64Array): -1 | 0 | 1 {
  // Both have one entry per key.
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return a[k]! < b[k]! ? -1 : 1;
  return 0;
}

/** The last word between candidates equal on every key (see `NODE_ID`). */
export function idBefore(a: NodeSnapshot, b: NodeSnapshot): boolean {
  return a.id < b.id;
}

/** What the pool keys read: one pool that can hold a sharded replica. */
export interface PoolPick {
  /** The pool's best candidates in rank order (select.ts `Candidate`), `n` of them first. */
  readonly top: readonly { readonly keys: Float64Array }[];
  /** Shards of the replica: nodes it takes from the pool. */
  readonly n: number;
  /** The pool's fitting candidates. */
  readonly fit: number;
}

const AVOID_AT = keyAt(RANKING, AVOID);
const EXISTING_AT = keyAt(RANKING, EXISTING);
const PACK_AT = keyAt(RANKING, PACK);

/** The sum of one `RANKING` figure (at `at` in `Candidate.keys`) over the nodes a pool would give. */
function sumOf(p: PoolPick, at: number): number {
  let sum = 0;
  // `top` holds at least `n` candidates, each with one figure per key.
  for (let i = 0; i < p.n; i++) sum += p.top[i]!.keys[at]!;
  return sum;
}

/**
 * 1. `avoided`: the fewest avoided nodes among the N the pool would give, as `AVOID`
 *    comes first among nodes.
 */
export const POOL_AVOIDED: RankKey<PoolPick> = { name: 'avoided', prefer: 'lowest', of: (p) => sumOf(p, AVOID_AT) };

/** 2. `spread`: the fewest replicas of this model on those N, as `EXISTING` among nodes. */
export const POOL_SPREAD: RankKey<PoolPick> = { name: 'spread', prefer: 'lowest', of: (p) => sumOf(p, EXISTING_AT) };

/**
 * 3. `fit`: the fewest fitting nodes in the pool, best fit on pools: the large pools stay
 *    whole for larger replicas.
 */
export const POOL_FIT: RankKey<PoolPick> = { name: 'fit', prefer: 'lowest', of: (p) => p.fit };

/** 4. `pack`: the fewest free GPUs on those N, as `PACK` among nodes. */
export const POOL_PACK: RankKey<PoolPick> = { name: 'pack', prefer: 'lowest', of: (p) => sumOf(p, PACK_AT) };

/**
 * How sharded.ts chooses among the pools that can hold a sharded replica, each offering
 * its first N nodes by `RANKING`: these keys in order, then the lowest pool name.
 */
export const POOL_RANKING: readonly RankKey<PoolPick>[] = [POOL_AVOIDED, POOL_SPREAD, POOL_FIT, POOL_PACK];

/** `of` of each key in `POOL_RANKING`, lowest first. */
export const POOL_RANK_VALUES: readonly ((p: PoolPick, c: number) => number)[] = lowestFirst(POOL_RANKING);
