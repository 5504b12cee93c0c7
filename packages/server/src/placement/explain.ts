import type { GpuReport } from '@llmgw/shared';
import type { NodeSnapshot, PlacementNote, Rejection } from '../snapshot.js';
import { NO_CATEGORY, type Detail } from './detail.js';
import type { FixedExplanation, Fleet, ProfileView, QuietNotes } from './fleet.js';
import { poolOf } from './requirement.js';
import type { NodeUsage } from './reservations.js';
import type { ProfileTally, ReasonCount } from './summary.js';
import { fitsNow } from './select.js';

/**
 * Explaining is a separate, slower pass, run only for a profile that does not fit (or
 * when asked): every applying check of the table on every node, every failure recorded
 * as a Rejection, in node order, then the counts behind the summary.
 */

/**
 * Runs every check of the view's plan on `node` and records every failure in `d`. True
 * when it fits. A check explains only when its own `fits`/`left` says the node fails, so
 * the explanation and the fast path cannot disagree; one whose explanation decides too
 * (`explainsPass`) is asked to explain straight away.
 */
export function evaluate(node: NodeSnapshot, usage: NodeUsage | undefined, view: ProfileView, d: Detail): boolean {
  const before = d.out.length;
  const { req, plan } = view;
  const { checks, need } = plan;
  for (let i = 0; i < checks.length; i++) {
    const check = checks[i];
    if (check === undefined) continue;
    if (check.explainsPass !== true) {
      // `need` has one entry per check of the plan.
      const fails = check.static ? !check.fits(node, req) : check.left(node, usage, req) < need[i]!;
      if (!fails) continue;
    }
    d.check = i;
    check.explain(node, usage, req, d);
  }
  return d.out.length === before;
}

/** What the checks could not check on a node they let through ("memory unknown"). */
export function nodeNotes(node: NodeSnapshot, view: ProfileView, gpus: readonly GpuReport[], out: PlacementNote[]): void {
  const noting = view.plan.noting;
  for (const check of noting) check.notes?.(node, view.req, gpus, out);
}

/** A node not chosen has no GPUs picked: one empty list for all of them. */
const NO_GPUS: readonly GpuReport[] = [];

/** The notes of every node of the fleet as a node not chosen, once per view. */
function quietOf(fleet: Fleet, view: ProfileView): QuietNotes {
  if (view.quiet !== undefined) return view.quiet;
  const nodes = fleet.nodes;
  const byNode = new Array<PlacementNote[] | undefined>(nodes.length).fill(undefined);
  const positions: number[] = [];
  if (view.plan.noting.length > 0) {
    // Most nodes have no notes: a list is allocated only for one that has.
    let out: PlacementNote[] = [];
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i];
      if (node === undefined) continue;
      nodeNotes(node, view, NO_GPUS, out);
      if (out.length === 0) continue;
      byNode[i] = out;
      positions.push(i);
      out = [];
    }
  }
  view.quiet = { positions: Int32Array.from(positions), byNode };
  return view.quiet;
}

/** A Detail pointed at no node yet: `pointAt` aims it at each node in turn. */
function detailOf(view: ProfileView, out: Rejection[]): Detail {
  return { profile: view.req.profile.name, pool: undefined, node: '', out, cat: NO_CATEGORY, plan: view.plan, check: -1, said: [] };
}

/** Aims `d` at `node`: one Detail serves a whole pass rather than one per node. */
function pointAt(d: Detail, view: ProfileView, node: NodeSnapshot, out: Rejection[]): void {
  d.pool = view.req.shards > 1 ? poolOf(node) : node.pool;
  d.node = node.id;
  d.out = out;
  d.cat = NO_CATEGORY;
}

/** The static failures' reasons, once per view and then only for nodes gone stale. */
function fixedOf(fleet: Fleet, view: ProfileView): FixedExplanation {
  const nodes = fleet.nodes;
  const known = view.fixed;
  if (known !== undefined) {
    if (known.stale.length > 0) refresh(fleet, view, known);
    return known;
  }
  const start = new Int32Array(nodes.length + 1);
  const cat = new Int32Array(nodes.length);
  const counts = new Array<number>(view.plan.cats.length).fill(0);
  const pools = new Set<string>();
  const flat: Rejection[] = [];
  const d = detailOf(view, flat);
  for (let i = 0; i < nodes.length; i++) {
    start[i] = flat.length;
    const node = nodes[i];
    if (node === undefined) continue;
    if (view.req.shards > 1) pools.add(poolOf(node));
    if (view.candAt[i]! >= 0) continue;
    const slot = explainNode(fleet, view, i, flat, d);
    cat[i] = slot;
    // A summary slot indexes `counts`.
    counts[slot] = counts[slot]! + 1;
  }
  start[nodes.length] = flat.length;
  view.fixed = { flat, start, cat, counts, pools: [...pools], stale: [] };
  return view.fixed;
}

/**
 * Explains the stale nodes again (a reservation landed there: their figures changed).
 * A node with as many reasons as before has them replaced where they stand; when one has
 * more or fewer, the list is put together again.
 */
function refresh(fleet: Fleet, view: ProfileView, known: FixedExplanation): void {
  // Stale positions index the nodes (and `start`, which has one more), and a node's slot indexes `counts`.
  const { flat, start } = known;
  const d = detailOf(view, []);
  let moved: Map<number, Rejection[]> | undefined;
  for (const pos of known.stale) {
    const was = known.cat[pos]!;
    known.counts[was] = known.counts[was]! - 1;
    const out: Rejection[] = [];
    const cat = explainNode(fleet, view, pos, out, d);
    known.cat[pos] = cat;
    known.counts[cat] = known.counts[cat]! + 1;
    const from = start[pos]!;
    if (out.length === start[pos + 1]! - from) for (let k = 0; k < out.length; k++) flat[from + k] = out[k]!;
    else (moved ??= new Map()).set(pos, out);
  }
  known.stale.length = 0;
  if (moved === undefined) return;
  const next: Rejection[] = [];
  const n = fleet.nodes.length;
  for (let p = 0; p < n; p++) {
    const own = moved.get(p);
    const from = start[p]!;
    const to = start[p + 1]!;
    start[p] = next.length;
    if (own !== undefined) for (const r of own) next.push(r);
    else for (let k = from; k < to; k++) next.push(flat[k]!);
  }
  start[n] = next.length;
  known.flat = next;
}

/** Appends items[from] .. items[to - 1] to `out` (one push each: faster than pushing slices). */
function pushRange<T>(out: T[], items: readonly T[], from: number, to: number): void {
  // from .. to - 1 index `items`.
  for (let k = from; k < to; k++) out.push(items[k]!);
}

/** Records the reasons node `pos` fails in `out`, through `d`; returns its summary slot. */
function explainNode(fleet: Fleet, view: ProfileView, pos: number, out: Rejection[], d: Detail): number {
  const node = fleet.nodes[pos]!; // callers pass positions of the fleet's nodes
  pointAt(d, view, node, out);
  evaluate(node, fleet.usage[pos], view, d);
  return d.cat;
}

/**
 * Every node against every check of the profile, every failure kept, in node order.
 * Fitting nodes that were not chosen get their notes here. Returns the profile's tally.
 */
export function explainProfile(
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
  const quiet = quietOf(fleet, view);
  const counts = fixed.counts.slice();
  const poolFit = new Map<string, number>(fixed.pools.map((p) => [p, 0]));
  let fit = 0;
  const fitting = new Set<number>();
  const d = detailOf(view, rejections);
  // Node order: the static failures' rejections between candidates are copied as they are.
  let next = 0;
  // `start` has an entry per position plus one.
  const copyUpTo = (end: number): void => pushRange(rejections, fixed.flat, fixed.start[next]!, fixed.start[end]!);
  for (const i of view.inOrder) {
    copyUpTo(i);
    next = i + 1;
    const node = nodes[i];
    if (node === undefined) continue;
    // A candidate passed the static checks, and its columns say whether it passes the
    // dynamic ones now: the same verdict `evaluate` reaches, without running every check
    // again. Only a failing node is evaluated, for its reasons.
    const c = view.candAt[i] ?? -1;
    const fits = c >= 0 && fitsNow(view, c);
    if (!fits) pointAt(d, view, node, rejections);
    if (fits || evaluate(node, fleet.usage[i], view, d)) {
      fit++;
      fitting.add(i);
      if (sharded) poolFit.set(poolOf(node), (poolFit.get(poolOf(node)) ?? 0) + 1);
      // Chosen nodes get their notes with their GPUs, where the decision is built.
      const said = quiet.byNode[i];
      if (said !== undefined && !chosen.has(node.id)) for (const n of said) notes.push(n);
    } else {
      // A failing node's slot indexes `counts`.
      counts[d.cat] = counts[d.cat]! + 1;
    }
  }
  copyUpTo(nodes.length);
  // A rejected node whose memory (say) is unknown says so too: the operator fixing its other
  // problem should know memory was never checked.
  for (const i of quiet.positions) {
    // `positions` holds positions with notes in `byNode`.
    if (!fitting.has(i)) for (const n of quiet.byNode[i]!) notes.push(n);
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
  const cats = view.plan.cats;
  for (let c = 0; c < counts.length; c++) {
    const count = counts[c];
    const cat = cats[c];
    if (count === undefined || cat === undefined || count <= 0) continue;
    reasons.push({ count, code: cat.code, one: cat.one, many: cat.many });
  }
  // Stable sort: equal counts keep category order, the most telling first.
  reasons.sort((a, b) => b.count - a.count);
  return { profile: req.profile.name, shards: req.shards, nodes: nodes.length, fit, reasons, pools: placed ? [] : pools };
}
