import type { GpuReport, Liveness, Model, NodeAdminState, NodeReport, Profile, RejectionCount, RejectionView } from '@llmgw/shared';

/**
 * What placement and reconciliation see: plain data, no I/O, no clock. The controller
 * builds a snapshot from the inventory and the store, and hands it to the pure
 * functions in placement/ and reconcile/.
 */
export interface NodeSnapshot {
  id: string;
  pool?: string;
  labels: Record<string, string>;
  admin: NodeAdminState;
  adminReason?: string;
  liveness: Liveness;
  /** Seconds since the last heartbeat (for "has not reported for 45s"). */
  lastSeenAgoS: number;
  /** Absent when the agent did not report memory: unknown, not zero. */
  memoryTotalMb?: number;
  /** Absent when the agent did not report them: unknown, not zero. */
  cpuCores?: number;
  gpus: GpuReport[];
  fabrics: string[];
  /** False when its agent refuses `engine: command` (no --allow-command-engine); absent from older agents, which run it. */
  allowsCommandEngine?: boolean;
  /** SHA-256s (lower case) of the model files in its agent's cache; absent when it reported none. */
  files?: ReadonlySet<string>;
  /** Draining only: when to stop waiting for replacements, and whether to skip them. */
  drainDeadlineMs?: number;
  drainForce?: boolean;
}

/** Resources held on one node by one shard of a placed replica. */
export interface Reservation {
  replicaId: string;
  model: string;
  nodeId: string;
  memoryMb: number;
  gpuUuids: string[];
}

/** One shard of a placement decision. */
export interface PlannedShard {
  nodeId: string;
  rank: number;
  gpuUuids: string[];
  gpuIndices: number[];
}

export interface Placement {
  profile: Profile;
  pool?: string;
  fabric?: string;
  shards: PlannedShard[];
}

/** A fitting node that still deserves a word in the explanation ("memory unknown"). */
export interface PlacementNote {
  profile: string;
  node: string;
  note: string;
}

export type Rejection = RejectionView;

export interface PlacementOutcome {
  /** Absent when no profile fits. */
  placement?: Placement;
  /** Every failing check of every node, for every profile tried. */
  rejections: Rejection[];
  notes: PlacementNote[];
  /** `0/5 nodes can run qwen-coder-14b: 3 too little memory, 1 cordoned, …` */
  summary: string;
  /** The summary's node counts by code, for programs; empty when placed. */
  reasons: RejectionCount[];
}

/** A profile as placement sees it: `min_memory_gb` may come from a GGUF estimate. */
export type PlacementProfile = Profile & { memory_estimated?: boolean };

export type { Model, Profile };

/** A node of the inventory as placement sees it: its last report, admin state and liveness, as plain data. */
export function nodeSnapshot(
  n: {
    id: string;
    report?: NodeReport | undefined;
    admin: { state: NodeAdminState; reason?: string; drainDeadline?: string; force?: boolean };
    lastSeenMs: number;
  },
  liveness: Liveness,
  nowMs: number,
): NodeSnapshot {
  const r = n.report;
  return {
    id: n.id,
    ...(r?.pool ? { pool: r.pool } : {}),
    labels: r?.labels ?? {},
    admin: n.admin.state,
    ...(n.admin.reason ? { adminReason: n.admin.reason } : {}),
    liveness,
    lastSeenAgoS: Math.max(0, Math.round((nowMs - n.lastSeenMs) / 1000)),
    ...(r?.memory_total_mb !== undefined ? { memoryTotalMb: r.memory_total_mb } : {}),
    ...(r?.cpu_cores !== undefined ? { cpuCores: r.cpu_cores } : {}),
    gpus: r?.gpus ?? [],
    fabrics: r?.fabrics ?? [],
    ...(r?.allow_command_engine === false ? { allowsCommandEngine: false } : {}),
    ...(r?.files?.length ? { files: new Set(r.files.map((f) => f.sha256.toLowerCase())) } : {}),
    ...(n.admin.state === 'draining' && n.admin.drainDeadline ? { drainDeadlineMs: Date.parse(n.admin.drainDeadline) } : {}),
    ...(n.admin.state === 'draining' && n.admin.force ? { drainForce: true } : {}),
  };
}
