import type { PlacementOutcome } from '../snapshot.js';
import type { PlannedAction } from './actions.js';
import { drains, drainsFinished } from './drains.js';
import { failures } from './failures.js';
import type { ReconcileInput } from './input.js';
import { lostNodes } from './lost-nodes.js';
import { holdFleet } from './placement.js';
import { Plan } from './plan.js';
import { retired } from './retired.js';
import { rollouts, rolloutStatus, type RolloutHalt, type RolloutStatus } from './rollout.js';
import { scaling } from './scaling.js';

export type { ModelLoad, ReconcileInput, ReconcilePolicy } from './input.js';
export type { ActionCode, PlannedAction, PlannedReplica } from './actions.js';
export { ACTION_CODES } from './actions.js';
export type { RolloutChange, RolloutHalt, RolloutStatus } from './rollout.js';

export interface ReconcileResult {
  /**
   * Every decision of the pass, in order, each with its code and reason: replicas to
   * create (the caller gives each its id, key and port when it applies the plan), to
   * stop and forget, and to change (copies; the input is not mutated).
   */
  actions: PlannedAction[];
  /** The last placement attempt per model, for `explain`. */
  attempts: Map<string, PlacementOutcome>;
  /** Replicas each model should have, after autoscaling. */
  desired: Map<string, number>;
  lowSince: Map<string, number>;
  /** Set when lost nodes' replicas are not being replaced, and why. */
  paused?: string;
  /** Where each model's rollout stands after the pass (models with a revision only). */
  rollouts: Map<string, RolloutStatus>;
  /** Rollouts this pass halted, to be stored. */
  halts: RolloutHalt[];
}

/**
 * Level-triggered reconciliation: compares the catalog's wishes and the fleet with the
 * replicas that exist and plans what to create, change and remove. Pure: the caller
 * applies and persists the plan, so the same snapshot always gives the same plan and
 * tests need no server. The order is the algorithm (see README.md): removals first,
 * then drains (replace before stopping), then rollouts (the same, for a new revision),
 * then scaling to the wanted count.
 */
export function reconcile(input: ReconcileInput): ReconcileResult {
  const plan = new Plan(input);
  retired(plan);
  failures(plan);
  lostNodes(plan);
  drainsFinished(plan);
  holdFleet(plan);
  drains(plan);
  rollouts(plan);
  scaling(plan);
  return {
    actions: plan.actions,
    attempts: plan.attempts,
    desired: plan.desired,
    lowSince: plan.lowSince,
    rollouts: statuses(plan),
    halts: plan.halts,
    ...(plan.paused !== undefined ? { paused: plan.paused } : {}),
  };
}

function statuses(plan: Plan): Map<string, RolloutStatus> {
  const out = new Map<string, RolloutStatus>();
  const replicas = [...plan.live(), ...plan.creations()];
  for (const model of plan.input.models) {
    const revision = plan.input.revisions?.get(model.name);
    if (revision === undefined) continue;
    const halt = plan.halts.find((h) => h.model === model.name);
    const stored = plan.input.rollouts?.get(model.name);
    const record = halt ? { model: model.name, history: [], ...stored, halted: { revision, reason: halt.reason, atMs: plan.nowMs } } : stored;
    out.set(model.name, rolloutStatus(model, revision, replicas, record, plan.rolloutBlocked.get(model.name)));
  }
  return out;
}
