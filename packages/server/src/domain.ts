import type { NodeAdminState, NodeReport, ReplicaState, ShardState } from '@llmgw/shared';

/** The operator's say over a node; persisted, survives restarts. */
export interface AdminState {
  state: NodeAdminState;
  reason?: string;
  /** ISO time of the last change. */
  changedAt?: string;
  /** Drain: when remaining replicas are stopped without waiting for replacements. */
  drainDeadline?: string;
  /** Drain: stop at once, without starting replacements first. */
  force?: boolean;
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
  /**
   * The `seq` of the heartbeat that set this shard's state: stored with the replica, so a
   * reload, a restart or a pulled row with an older heartbeat never moves it back.
   */
  reportSeq?: number;
}

/**
 * What a replica's engines run, copied from its catalog profile when the replica was
 * created: a catalog edit reaches it only through a rollout, which replaces the replica
 * with one of the new revision (`reconcile/rollout.ts`).
 */
export interface ReplicaSpec {
  engine: string;
  source: string;
  args: string[];
  env: Record<string, string>;
  command?: string[];
  startupTimeoutS?: number;
  /** For an http(s):// or llmgw:// source: the file the agent fetches and verifies first. */
  file?: { url: string; sha256: string; size_bytes?: number };
  /** The model's LoRA adapters (issue 31), each fetched like `file` when it is a URL. */
  adapters?: Array<{ name: string; source: string; file?: { url: string; sha256: string } }>;
  /** Adapters one replica holds loaded at once (the profile's `max_loaded_adapters`, or the default). */
  maxLoadedAdapters?: number;
}

/** One running copy of a model, made of one or more shards (one per node it spans). */
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
  /** The replica on a draining node this one was started to replace. */
  replaces?: string;
  /** When it last became ready; a replacement must stay ready a while before the old one stops. */
  readySinceMs?: number;
  /** When it stopped taking new traffic (state `draining`), and why. */
  drainStartedMs?: number;
  drainReason?: string;
  /** Why its node's drain cannot move it (no room elsewhere), from the last attempt. */
  drainBlocked?: string;
  /**
   * Its replacements that failed in a row with one error: the drain stops placing more at
   * `DRAIN_SAME_FAILURES` (each would fail the same way) until the error changes or the
   * drain is asked for again.
   */
  drainFailures?: { error: string; count: number };
  /** Absent only on replicas stored by a server from before specs were frozen. */
  spec?: ReplicaSpec;
  /**
   * The model's revision it was planned with (`reconcile/revision.ts`); absent on replicas
   * stored by a server from before revisions, which count as current (no restart on upgrade).
   */
  revision?: string;
  shards: Shard[];
}

/** States that count toward a model's replica target and hold resources. */
export const ACTIVE_REPLICA_STATES: ReadonlySet<ReplicaState> = new Set(['pending', 'starting', 'ready']);
export const HOLDS_RESOURCES: ReadonlySet<ReplicaState> = new Set(['pending', 'starting', 'ready', 'draining']);

export type { NodeReport };

/** One revision of a model as first seen, for `ctl rollout history`. */
export interface RevisionEntry {
  revision: string;
  /** When it became current (again, for a reverted file). */
  sinceMs: number;
  /** What changed from the revision before, in one line (`describeChange`). */
  change: string;
  /** What the revision is a digest of (`revisionContent`), to describe the next change. */
  content: Record<string, unknown>;
}

/** The operator's say over a model's rollout (`ctl rollout pause|resume`); written by the instance the request reached. */
export interface RolloutControl {
  paused?: boolean;
  /** The last `ctl rollout resume`: it lifts an earlier halt of that revision, and `pause_after` does not pause it again. */
  resumed?: { revision: string; atMs: number };
}

/** What the planning instance records of a model's rollouts. */
export interface RolloutHistory {
  /** The revision whose new replicas failed, why, and when: no further old replica is replaced. */
  halted?: { revision: string; reason: string; atMs: number };
  /** Revisions in the order they became current, the current one last. */
  history: RevisionEntry[];
}

/**
 * What is stored of a model's rollouts. Where a rollout stands is never stored: it is
 * derived from the replicas (`rolloutStatus`).
 */
export type RolloutRecord = { model: string } & RolloutControl & RolloutHistory;

/**
 * One decision the controller carried out: a reconcile action as applied (`create`,
 * `remove`, `update`, with the reconciler's code and reason), or a replica an agent
 * reported failed (`report`). `replica` is the replica as created, as it was before
 * removal, or as it is after the update.
 */
export interface Decision {
  kind: 'create' | 'remove' | 'update' | 'report';
  code: string;
  reason: string;
  replicaId?: string;
  replica?: Replica;
}
