import type { NodeAdminState, NodeReport, ReplicaState, ShardState } from '@llmgw/shared';

/** The operator's say over a node; persisted, survives restarts. */
export interface AdminState {
  state: NodeAdminState;
  reason?: string;
  /** ISO time of the last change. */
  changedAt?: string;
}

export interface Shard {
  id: string;
  nodeId: string;
  rank: number;
  gpuUuids: string[];
  gpuIndices: number[];
  state: ShardState;
  error?: string;
  port?: number;
  pid?: number;
  restarts?: number;
}

/** One running copy of a model, made of one or more shards (DESIGN §2). */
export interface Replica {
  id: string;
  model: string;
  profile: string;
  state: ReplicaState;
  pool?: string;
  fabric?: string;
  /** The rank-0 shard's HTTP address once it is ready. */
  endpoint?: string;
  error?: string;
  createdAtMs: number;
  /** Host memory reserved on each shard's node, in MiB. */
  memoryMb: number;
  /** Per-replica key so that only the gateway can call the engine. */
  apiKey: string;
  /** Port rank 0 listens on for the other ranks of a multi-node replica. */
  masterPort?: number;
  shards: Shard[];
}

/** States that count toward a model's replica target and hold resources. */
export const ACTIVE_REPLICA_STATES: ReadonlySet<ReplicaState> = new Set(['pending', 'starting', 'ready']);
export const HOLDS_RESOURCES: ReadonlySet<ReplicaState> = new Set(['pending', 'starting', 'ready', 'draining']);

export type { NodeReport };
