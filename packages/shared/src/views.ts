import { Type, type Static } from '@sinclair/typebox';
import { DownloadProgressSchema } from './agent.js';

/**
 * Admin API views: what `GET /api/v1/...` answers (packages/server/src/api). Field names follow the original system's admin API so
 * that scripts written against it keep working.
 */

/** `pending-approval`: joined under `--join-approval manual`, not yet approved (no placement, no assignments). */
export const NodeAdminStates = ['ready', 'cordoned', 'draining', 'pending-approval'] as const;
export type NodeAdminState = (typeof NodeAdminStates)[number];
export const NodeLiveness = ['ready', 'not-ready', 'lost'] as const;
export type Liveness = (typeof NodeLiveness)[number];

const Lit = <T extends readonly string[]>(xs: T) => Type.Union(xs.map((x) => Type.Literal(x)));

export const NodeViewSchema = Type.Object({
  id: Type.String(),
  hostname: Type.Optional(Type.String()),
  mgmt_addr: Type.Optional(Type.String()),
  /** The operator's admin state: ready, cordoned, draining or pending-approval. */
  state: Lit(NodeAdminStates),
  state_reason: Type.Optional(Type.String()),
  /** Derived from heartbeats, independent of the admin state. */
  liveness: Lit(NodeLiveness),
  labels: Type.Record(Type.String(), Type.String()),
  pool: Type.Optional(Type.String()),
  gpu_total: Type.Integer(),
  gpu_free: Type.Integer(),
  /** The machine's RAM in GiB (the name is kept for scripts); omitted (not 0) when the agent did not report it. */
  memory_gb: Type.Optional(Type.Number()),
  memory_reserved_gb: Type.Optional(Type.Number()),
  gpu_classes: Type.Array(Type.String()),
  fabrics: Type.Array(Type.String()),
  /** GPUs kept out of placement and why, e.g. "gpu 3: fell off the bus". */
  unhealthy_gpus: Type.Array(Type.String()),
  gpu_error: Type.Optional(Type.String()),
  /**
   * Seconds since the node's last heartbeat to this server; absent when none came since
   * the server started (a node it knows from its store, or one that never reported).
   */
  last_seen_s: Type.Optional(Type.Integer({ minimum: 0 })),
  agent_version: Type.Optional(Type.String()),
  /** Shards placed on this node. */
  replicas: Type.Integer(),
  /** While draining: what the drain is waiting for, or why it cannot proceed. */
  drain_status: Type.Optional(Type.String()),
  drain_deadline: Type.Optional(Type.String()),
  /** For a lost node whose replicas are not being replaced, why. */
  replacement_paused: Type.Optional(Type.String()),
  /**
   * Present while the node's credential was lately heard from two addresses or hostnames
   * at once (a copy in use elsewhere): why. `ctl nodes` marks the node `suspect`.
   */
  suspect: Type.Optional(Type.String()),
});
export type NodeView = Static<typeof NodeViewSchema>;

/**
 * Where a model's rollout to its current revision stands: `complete` (every replica
 * current and ready), `progressing`, `paused` (`ctl rollout pause`, or `pause_after`),
 * `waiting` (no room to replace the next replica; `reason` says why) or `halted` (a new
 * replica failed or was not ready in time; the old revision keeps serving).
 */
export const RolloutStates = ['complete', 'progressing', 'paused', 'waiting', 'halted'] as const;
export type RolloutState = (typeof RolloutStates)[number];

/** A LoRA adapter of a model (issue 31), and where it is loaded. */
export const ModelAdapterViewSchema = Type.Object({
  name: Type.String(),
  /** Its `source`, shown as the model's is (credentials masked; a viewer sees only a URL's host). */
  source: Type.String(),
  /**
   * Ready replicas that hold it loaded now, as the gateway routed it (its record of each
   * replica's adapter slots, least recently used evicted first).
   */
  loaded_on: Type.Array(Type.String()),
});
export type ModelAdapterView = Static<typeof ModelAdapterViewSchema>;

export const ModelViewSchema = Type.Object({
  name: Type.String(),
  aliases: Type.Array(Type.String()),
  source: Type.String(),
  min_replicas: Type.Integer(),
  max_replicas: Type.Integer(),
  ready_replicas: Type.Integer(),
  total_replicas: Type.Integer(),
  fallbacks: Type.Array(Type.String()),
  profiles: Type.Array(Type.String()),
  /** The model's routing policy, its default filled in: `cache-aware` or `least-loaded`. */
  routing: Type.String(),
  /** The last placement attempt's one-line summary, when the model is short of replicas. */
  placement_summary: Type.Optional(Type.String()),
  /** The catalog's revision of the model, and how many of its replicas run it. */
  revision: Type.Optional(Type.String()),
  up_to_date: Type.Optional(Type.Integer()),
  /** Where its rollout stands (`RolloutStates`). */
  rollout: Type.Optional(Lit(RolloutStates)),
  /** Its LoRA adapters, in catalog order; absent when it has none. */
  adapters: Type.Optional(Type.Array(ModelAdapterViewSchema)),
});
export type ModelView = Static<typeof ModelViewSchema>;

export const RolloutViewSchema = Type.Object({
  model: Type.String(),
  /** The catalog's revision of the model now. */
  revision: Type.String(),
  state: Lit(RolloutStates),
  reason: Type.Optional(Type.String()),
  /** When it was halted (ISO time). */
  halted_at: Type.Optional(Type.String()),
  /** Replicas the model serves with or is starting, replacements left out. */
  replicas: Type.Integer(),
  /** Replicas of the current revision, and how many of them are ready. */
  updated: Type.Integer(),
  ready: Type.Integer(),
  /** Replicas of an earlier revision still serving or starting. */
  outdated: Type.Integer(),
  max_surge: Type.Integer(),
  max_unavailable: Type.Integer(),
  progress_deadline_s: Type.Number(),
  pause_after: Type.Optional(Type.Integer()),
  /** Set by `ctl rollout pause`. */
  paused: Type.Boolean(),
  /** Revisions as first seen, oldest first. */
  history: Type.Array(
    Type.Object({
      revision: Type.String(),
      /** When it became current (again, for a reverted file). */
      since: Type.String(),
      change: Type.String(),
      current: Type.Boolean(),
    }),
  ),
});
export type RolloutView = Static<typeof RolloutViewSchema>;

export const ReplicaStates = ['pending', 'starting', 'ready', 'draining', 'stopped', 'failed'] as const;
export type ReplicaState = (typeof ReplicaStates)[number];
export const ShardViewStates = ['pending', 'starting', 'ready', 'failed', 'stopped'] as const;
export type ShardState = (typeof ShardViewStates)[number];
/**
 * What a view shows: a replica's or shard's state, or `unknown` while its node has
 * stopped reporting (not-ready or lost), because nobody knows whether the engine there
 * still runs; the gateway routes nothing to it meanwhile.
 */
export const UNKNOWN_STATE = 'unknown';

export const ShardViewSchema = Type.Object({
  id: Type.String(),
  node: Type.String(),
  rank: Type.Integer(),
  gpus: Type.Array(Type.Integer()),
  state: Lit([...ShardViewStates, UNKNOWN_STATE] as const),
  /** The engine's port and pid on its node, as its agent last reported them. */
  port: Type.Optional(Type.Integer()),
  pid: Type.Optional(Type.Integer()),
  restarts: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String()),
  /** While its model file comes (state `starting`), as its agent last reported (`downloadText` words it). */
  download: Type.Optional(DownloadProgressSchema),
});
export type ShardView = Static<typeof ShardViewSchema>;

export const ReplicaViewSchema = Type.Object({
  id: Type.String(),
  model: Type.String(),
  profile: Type.String(),
  /** `unknown` while a node of the replica has stopped reporting (see `UNKNOWN_STATE`). */
  state: Lit([...ReplicaStates, UNKNOWN_STATE] as const),
  pool: Type.Optional(Type.String()),
  fabric: Type.Optional(Type.String()),
  endpoint: Type.Optional(Type.String()),
  age_seconds: Type.Integer(),
  error: Type.Optional(Type.String()),
  /**
   * What else an operator should know of a replica that is not wrong: `serving, agent
   * silent 42s` while its agent is silent but its engine answers the server's probes and
   * takes traffic (until the node is lost and the replica replaced).
   */
  note: Type.Optional(Type.String()),
  /** The model's revision the replica runs; absent on one from before revisions. */
  revision: Type.Optional(Type.String()),
  /** The engine's per-replica key; only with `?show_keys=true`, for calling an engine directly. */
  api_key: Type.Optional(Type.String()),
  /**
   * The LoRA adapters it holds loaded, least recently used first, as the gateway routed
   * them (`ModelAdapterView.loaded_on`); absent for a model without adapters.
   */
  adapters: Type.Optional(Type.Array(Type.String())),
  shards: Type.Array(ShardViewSchema),
});
export type ReplicaView = Static<typeof ReplicaViewSchema>;

/**
 * Every reason placement gives for not using a node (or, `shards`, a pool). Closed, so a
 * client can switch on it: a new placement check adds its code here first.
 */
export const RejectionCodes = [
  'not_ready',
  'pending_approval',
  'cordoned',
  'draining',
  'label',
  'command_engine',
  'fabric',
  'memory',
  'cpu_cores',
  'gpu_count',
  'gpu_class',
  'gpu_memory',
  'gpu_health',
  'shards',
] as const;
export type RejectionCode = (typeof RejectionCodes)[number];

/** One rejected candidate: data first, rendered to text late. */
export const RejectionViewSchema = Type.Object({
  profile: Type.String(),
  pool: Type.Optional(Type.String()),
  node: Type.Optional(Type.String()),
  /** Machine-readable check name, e.g. `memory`, `cordoned`, `gpu_count`. */
  code: Lit(RejectionCodes),
  reason: Type.String(),
  requested: Type.Optional(Type.Union([Type.Number(), Type.String()])),
  available: Type.Optional(Type.Union([Type.Number(), Type.String()])),
});
export type RejectionView = Static<typeof RejectionViewSchema>;

/** Nodes counted under one rejection code. */
export const RejectionCountSchema = Type.Object({
  code: Lit(RejectionCodes),
  count: Type.Integer({ minimum: 1 }),
});
export type RejectionCount = Static<typeof RejectionCountSchema>;

export const ExplainViewSchema = Type.Object({
  model: Type.String(),
  /** True when the model has replicas counting toward its target. */
  placed: Type.Boolean(),
  /** False until the reconciler has tried to place the model. */
  attempted: Type.Boolean(),
  summary: Type.Optional(Type.String()),
  /**
   * The counts behind the summary, for programs: nodes that do not fit the profile the
   * summary speaks of, each counted once under its most telling reason, largest first.
   * Empty when the model was placed; absent until attempted.
   */
  reasons: Type.Optional(Type.Array(RejectionCountSchema)),
  attempted_at: Type.Optional(Type.String()),
  /** Nodes that fit, per profile, in the last attempt (notes such as "memory unknown"). */
  notes: Type.Array(Type.Object({ profile: Type.String(), node: Type.String(), note: Type.String() })),
  rejections: Type.Array(RejectionViewSchema),
  /** Shards of the model whose file is coming now: a replica placed but not yet started. */
  downloads: Type.Optional(Type.Array(Type.Object({ replica: Type.String(), node: Type.String(), progress: DownloadProgressSchema }))),
  /**
   * When a LoRA adapter was asked about (`model` is then its base): why it cannot be
   * served now, one line per reason (none when it can): no ready replica of its base,
   * none started with it, its file failing its checksum.
   */
  adapter: Type.Optional(Type.Object({ name: Type.String(), problems: Type.Array(Type.String()) })),
});
export type ExplainView = Static<typeof ExplainViewSchema>;

export const NodeStateRequestSchema = Type.Object({
  state: Type.String({ maxLength: 64 }),
  reason: Type.Optional(Type.String({ maxLength: 1024 })),
  /** Drain only: seconds after which remaining replicas are stopped without waiting for replacements. */
  deadline_s: Type.Optional(Type.Number({ minimum: 0, maximum: 30 * 24 * 3600 })),
  /** Drain only: stop replicas at once, without starting replacements first. */
  force: Type.Optional(Type.Boolean()),
});
export type NodeStateRequest = Static<typeof NodeStateRequestSchema>;

/** Maps the verbs and states the admin API accepts onto admin states. */
export const NodeStateAliases: Record<string, NodeAdminState> = {
  ready: 'ready',
  uncordon: 'ready',
  cordoned: 'cordoned',
  cordon: 'cordoned',
  draining: 'draining',
  drain: 'draining',
};

/** A model file in a node's cache (`GET /api/v1/files`, `ctl files`), from its agent's report. */
export const NodeFileViewSchema = Type.Object({
  node: Type.String(),
  sha256: Type.String(),
  source: Type.String(),
  size_bytes: Type.Integer(),
  /** ISO 8601: when a shard last started on it. */
  last_used: Type.String(),
  /** A shard of the node uses it now: it is never evicted. */
  in_use: Type.Boolean(),
});
export type NodeFileView = Static<typeof NodeFileViewSchema>;
