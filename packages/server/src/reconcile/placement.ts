import type { Model } from '@llmgw/shared';
import { placeOnFleet, prepareFleet, reservationsFor, reservationsOf, reservedMemoryMb, reserve, type Fleet } from '../placement/index.js';
import type { Replica } from '../domain.js';
import type { Placement, PlacementOutcome } from '../snapshot.js';
import type { CreateCode, PlannedReplica } from './actions.js';
import type { Plan } from './plan.js';
import { specOf } from './spec.js';

export type { Fleet };

/**
 * Takes the resources of the replicas still there as the pass's fleet. Called once,
 * after the removals: a replica that a later step stops still holds its GPUs until its
 * agent has stopped it, so they are not handed out again in the same pass.
 */
export function holdFleet(plan: Plan): Fleet {
  plan.fleet = prepareFleet(plan.input.nodes, reservationsOf(plan.live()));
  return plan.fleet;
}

/**
 * Placement, the step drains and scaling call: finds room for one more replica of `model`
 * away from `avoid`, and plans it. Every attempt is kept for `explain`, placed or not;
 * what a planned replica reserves is taken off the fleet before the next attempt.
 */
export function placeReplica(plan: Plan, model: Model, avoid: string[], why: { code: CreateCode; reason: string; replaces?: string }): PlacementOutcome {
  const fleet = plan.fleet ?? holdFleet(plan);
  const existingOnNode: Record<string, number> = {};
  for (const r of [...plan.live(), ...plan.creations()]) {
    if (r.model !== model.name) continue;
    for (const s of r.shards) existingOnNode[s.nodeId] = (existingOnNode[s.nodeId] ?? 0) + 1;
  }
  const outcome = placeOnFleet(fleet, model, { existingOnNode, avoidNodes: avoid });
  plan.attempts.set(model.name, outcome);
  if (!outcome.placement) return outcome;
  const replica = planned(model, outcome.placement, plan.nowMs, why.replaces, plan.input.revisions?.get(model.name));
  if (plan.halted(model.name)) runAsServing(replica, plan.live());
  plan.create(replica, why.code, why.reason);
  // The id only tells reservations of different replicas apart; the real one comes when the plan is applied.
  reserve(fleet, reservationsFor(outcome.placement, `planned-${plan.creations().length}`, model.name));
  return outcome;
}

/**
 * While a model's rollout is halted, a replica placed for it (a scale-up, a lost node's
 * replacement) runs what a serving replica of its profile runs, not the failing revision.
 */
function runAsServing(replica: PlannedReplica, live: readonly Replica[]): void {
  const like = live.find((r) => r.model === replica.model && r.profile === replica.profile && r.state === 'ready' && r.spec && r.revision !== replica.revision);
  if (!like?.spec) return;
  replica.spec = like.spec;
  if (like.revision !== undefined) replica.revision = like.revision;
  else delete replica.revision;
}

function planned(model: Model, p: Placement, nowMs: number, replaces: string | undefined, revision: string | undefined): PlannedReplica {
  return {
    model: model.name,
    profile: p.profile.name,
    state: 'pending',
    ...(p.pool ? { pool: p.pool } : {}),
    ...(p.fabric ? { fabric: p.fabric } : {}),
    createdAtMs: nowMs,
    memoryMb: reservedMemoryMb(p.profile),
    ...(replaces !== undefined ? { replaces } : {}),
    spec: specOf(model, p.profile),
    ...(revision !== undefined ? { revision } : {}),
    shards: p.shards.map((s) => ({ nodeId: s.nodeId, rank: s.rank, gpuUuids: s.gpuUuids, gpuIndices: s.gpuIndices, state: 'pending' })),
  };
}
