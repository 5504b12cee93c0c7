import type { ReplicaState } from '@llmgw/shared';
import type { Replica, ReplicaSpec } from '../domain.js';

/**
 * Why the plan does something, as a closed set: logs, tests and (later) the admin API
 * match on the code, and the reason next to it is the sentence for people.
 */
export const ACTION_CODES = [
  // Removals: the replica is stopped and forgotten.
  'model-gone',
  'profile-gone',
  'stopped',
  'failed',
  'node-lost',
  'node-unknown',
  'drained',
  'drain-forced',
  'drain-deadline',
  'drain-not-serving',
  'scaled-down',
  'idle',
  'outdated-not-serving',
  'rollout-halted',
  // Creations.
  'scale-up',
  'drain-replacement',
  'rollout',
  // Updates of an existing replica (`scaled-down` and `idle` too: a ready replica steps down).
  'traffic-moved',
  'drain-blocked',
  'drain-unblocked',
  'rolled-over',
  'rollout-in-place',
] as const;
export type ActionCode = (typeof ACTION_CODES)[number];

export type RemoveCode = Extract<
  ActionCode,
  | 'model-gone'
  | 'profile-gone'
  | 'stopped'
  | 'failed'
  | 'node-lost'
  | 'node-unknown'
  | 'drained'
  | 'drain-forced'
  | 'drain-deadline'
  | 'drain-not-serving'
  | 'scaled-down'
  | 'idle'
  | 'outdated-not-serving'
  | 'rollout-halted'
>;
export type CreateCode = Extract<ActionCode, 'scale-up' | 'drain-replacement' | 'rollout'>;
export type UpdateCode = Extract<
  ActionCode,
  'traffic-moved' | 'drain-blocked' | 'drain-unblocked' | 'scaled-down' | 'idle' | 'rolled-over' | 'rollout-in-place'
>;

/** A shard of a replica the plan creates; its id comes with the replica's. */
export interface PlannedShard {
  nodeId: string;
  rank: number;
  gpuUuids: string[];
  gpuIndices: number[];
  state: 'pending';
}

/**
 * A replica the plan wants created. It has no id, key or rendezvous port yet: the
 * caller allocates those when it applies the plan, so planning stays pure.
 */
export interface PlannedReplica {
  model: string;
  profile: string;
  state: Extract<ReplicaState, 'pending'>;
  pool?: string;
  fabric?: string;
  createdAtMs: number;
  memoryMb: number;
  replaces?: string;
  spec: ReplicaSpec;
  /** The model's revision the spec is of (`revision.ts`). */
  revision?: string;
  shards: PlannedShard[];
}

/**
 * One decision of a pass, in the order the steps took them: the plan's only record of
 * what it does. An update carries the replica as the whole pass changed it (every update
 * of one replica in a pass shares that copy); a replica a later step removes is removed.
 */
export type PlannedAction =
  | { kind: 'remove'; code: RemoveCode; replicaId: string; model: string; reason: string }
  | { kind: 'create'; code: CreateCode; replica: PlannedReplica; reason: string }
  | { kind: 'update'; code: UpdateCode; replicaId: string; model: string; reason: string; replica: Replica };
