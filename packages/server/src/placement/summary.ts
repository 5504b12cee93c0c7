import type { RejectionCode, RejectionCount } from '@llmgw/shared';
import type { Placement, Rejection } from '../snapshot.js';

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

/** Nodes counted under one summary category. */
export interface ReasonCount {
  count: number;
  code: RejectionCode;
  /** Phrase after a count of 1, e.g. `lacks label role=coding`. */
  one: string;
  /** Phrase after a larger count, e.g. `lack label role=coding`. */
  many: string;
}

/** Pools named in a summary line; the rest are counted. */
const SUMMARY_POOLS = 3;

/**
 * The profile a failed attempt is summarised by: the one that came closest (most
 * fitting nodes; the earlier profile on a tie, so with nothing fitting it is the
 * preferred one).
 */
function closest(tallies: readonly ProfileTally[]): ProfileTally | undefined {
  let best: ProfileTally | undefined;
  for (const t of tallies) if (best === undefined || t.fit > best.fit) best = t;
  return best;
}

/**
 * The one-line summary of an attempt, from the tallies of the profiles tried (in order).
 *
 * Placed: `placed qwen-coder-14b on cpu-3 (profile cpu; 4/5 nodes fit)`, naming the
 * profiles that were tried first and did not fit. Not placed:
 * `0/5 nodes can run qwen-coder-14b: 3 too little memory, 1 cordoned, 1 lacks label role=coding`,
 * with the counts of the profile that came closest, and the profile named when the
 * model has more than one.
 */
export function summarize(modelName: string, tallies: readonly ProfileTally[], placement?: Placement): string {
  if (placement !== undefined) {
    const won = tallies[tallies.length - 1];
    const where = placement.shards.map((s) => s.nodeId).join(', ');
    const pool = placement.shards.length > 1 && placement.pool ? ` in pool ${placement.pool}` : '';
    const earlier = tallies.slice(0, -1).map((t) => t.profile);
    const after = earlier.length > 0 ? `; ${earlier.join(', ')} did not fit` : '';
    const fit = won ? `; ${won.fit}/${won.nodes} nodes fit` : '';
    return `placed ${modelName} on ${where}${pool} (profile ${placement.profile.name}${fit}${after})`;
  }
  const best = closest(tallies);
  if (best === undefined) return `${modelName} has no profiles to place`;
  if (best.nodes === 0) return `0/0 nodes can run ${modelName}: no nodes in the inventory`;
  const which = tallies.length > 1 ? ` (profile ${best.profile})` : '';
  const parts = best.reasons.map((r) => `${r.count} ${r.count === 1 ? r.one : r.many}`);
  let line = `${best.fit}/${best.nodes} nodes can run ${modelName}${which}`;
  if (parts.length > 0) line += `: ${parts.join(', ')}`;
  if (best.shards > 1) {
    const named = best.pools.slice(0, SUMMARY_POOLS).map((p) => `pool ${p.pool}: fits ${p.fit} of ${best.shards} shards`);
    const more = best.pools.length - named.length;
    if (more > 0) named.push(`${more} more ${more === 1 ? 'pool' : 'pools'}`);
    if (named.length === 0) named.push(`no pool has ${best.shards} fitting nodes`);
    line += `${parts.length > 0 ? ';' : ':'} ${named.join(', ')}`;
  }
  return line;
}

/**
 * The summary's node counts as data, by code: what `ExplainView.reasons` carries so that
 * programs need not parse the sentence. Only for a model that was not placed (a placed
 * outcome carries none).
 */
export function reasonCounts(tallies: readonly ProfileTally[]): RejectionCount[] {
  const best = closest(tallies);
  if (best === undefined) return [];
  const out: RejectionCount[] = [];
  for (const r of best.reasons) {
    const known = out.find((o) => o.code === r.code);
    if (known !== undefined) known.count += r.count;
    else out.push({ code: r.code, count: r.count });
  }
  // Stable: equal counts keep the summary's order.
  return out.sort((a, b) => b.count - a.count);
}

/** One rejection as a line of text: `node-7: has 8 GiB of memory, needs 24`. */
export function renderRejection(r: Rejection): string {
  return r.node !== undefined ? `${r.node}: ${r.reason}` : r.reason;
}
