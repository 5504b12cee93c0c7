import type { Model } from '@llmgw/shared';
import type { NodeSnapshot, Placement, PlacementNote, PlacementOutcome, PlannedShard, Rejection, Reservation } from '../snapshot.js';
import { fileDigestOf } from '../files/sources.js';
import { explainProfile, nodeNotes } from './explain.js';
import { modelCounts, prepareFleet, rankIds, reserve, viewOf, type Fleet } from './fleet.js';
import { reservationsFor } from './reservations.js';
import { chooseGpus, pickSingle, type Context } from './select.js';
import { pickSharded } from './sharded.js';
import { reasonCounts, summarize, type ProfileTally } from './summary.js';

/**
 * Placement: a pure function from an inventory snapshot, the reservations of
 * replicas already placed and a model to a decision, or to the reasons there is none.
 * The steps are drawn in README.md.
 */

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

function toMap(m: ReadonlyMap<string, number> | Readonly<Record<string, number>> | undefined): ReadonlyMap<string, number> | undefined {
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
    counts: modelCounts(fleet, model.name),
    existing: toMap(options.existingOnNode),
    avoid: options.avoidNodes && options.avoidNodes.length > 0 ? new Set(options.avoidNodes) : undefined,
  };
  const rejections: Rejection[] = [];
  const notes: PlacementNote[] = [];
  const tallies: ProfileTally[] = [];
  for (const profile of model.profiles) {
    const view = viewOf(fleet, profile);
    const file = fileDigestOf(model, profile);
    const pctx = file === undefined ? ctx : { ...ctx, file };
    const found = view.req.shards > 1 ? pickSharded(fleet, view, pctx) : pickSingle(fleet, view, pctx);
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
      nodeNotes(c.node, view, gpus, notes);
      return {
        nodeId: c.node.id,
        rank,
        gpuUuids: gpus.map((g) => g.uuid as string),
        gpuIndices: gpus.map((g) => g.index),
      };
    });
    const placement: Placement = {
      profile,
      pool: view.req.shards > 1 ? found.pool : chosen[0]?.node.pool,
      fabric: view.req.fabric,
      shards,
    };
    return { placement, rejections, notes, summary: summarize(model.name, tallies, placement), reasons: [] };
  }
  return { rejections, notes, summary: summarize(model.name, tallies), reasons: reasonCounts(tallies) };
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
