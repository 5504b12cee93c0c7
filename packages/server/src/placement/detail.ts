import type { RejectionCode } from '@llmgw/shared';
import type { Rejection } from '../snapshot.js';

/**
 * What a check's explanation writes into: the summary categories a failing node is
 * counted under and the Detail the explain pass points at one node after another
 * (checks.ts declares the checks, explain.ts runs them).
 */

/** A line of the summary that a failing node can be counted under. */
export interface Category {
  /**
   * Place in the summary, lowest first. A node is counted once, under its most telling
   * reason: static mismatches (the node could never run the profile) come before
   * capacity it is short of right now, because "cordoned" or "lacks label" is what the
   * operator has to act on first; "too little memory" on a cordoned node is moot.
   */
  rank: number;
  code: RejectionCode;
  /** Phrase after a count of 1, e.g. `lacks label role=coding`. */
  one: string;
  /** Phrase after a larger count, e.g. `lack label role=coding`. */
  many: string;
}

/** Where the explain pass records reasons, one node at a time. */
export interface Detail {
  profile: string;
  pool: string | undefined;
  node: string;
  out: Rejection[];
  /** Lowest summary slot seen for the current node. */
  cat: number;
  /** The plan's summary categories and, per applying check, its categories' slots among them. */
  plan: { readonly slots: readonly Int32Array[]; readonly cats: readonly Category[] };
  /** Index in `plan.checks` of the check explaining. */
  check: number;
  /** By summary slot, what nodes alike were told in this pass (`said`): one string for all of them. */
  said: (Map<string | number, Said> | undefined)[];
}

export const NO_CATEGORY = Number.MAX_SAFE_INTEGER;

/** Records a failure under category `category` of the check explaining. */
export function reject(d: Detail, category: number, reason: string, requested?: number | string, available?: number | string): void {
  // `d.check` is the explaining check's index in the plan and `category` one of its own:
  // `slots` and `cats` are built from the same categories, so both lookups are in range.
  const slot = d.plan.slots[d.check]![category]!;
  const code = d.plan.cats[slot]!.code;
  d.out.push({ profile: d.profile, pool: d.pool, node: d.node, code, reason, requested, available });
  if (slot < d.cat) d.cat = slot;
}

/** A reason and its `available` figure, as every node with the same figure is told it. */
export interface Said {
  reason: string;
  available: string | number | undefined;
}

/** What a node alike (the same `key`) was told under `category` in this pass; undefined the first time. */
export function said(d: Detail, category: number, key: string | number): Said | undefined {
  // `d.check` and `category` name a slot, as in `reject`.
  return d.said[d.plan.slots[d.check]![category]!]?.get(key);
}

/** Records what nodes with figure `key` are told under `category` (`said`), and returns it. */
export function tell(d: Detail, category: number, key: string | number, reason: string, available: string | number | undefined): Said {
  const slot = d.plan.slots[d.check]![category]!;
  const told = { reason, available };
  (d.said[slot] ??= new Map()).set(key, told);
  return told;
}
