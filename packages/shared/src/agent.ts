import { Type, type Static, type TSchema } from '@sinclair/typebox';

/**
 * The agent protocol (drawn in packages/agent/README.md, "Pipeline"). The agent sends a heartbeat every few seconds with
 * its node report and the status of every shard it runs, and the server acknowledges it;
 * a long-poll next to it receives the full set of shards the node should run. Unknown fields are allowed so that an older server can
 * talk to a newer agent; known fields must have the right type.
 */

const Str = (opts = {}) => Type.String({ maxLength: 4096, ...opts });
const Id = Type.String({ minLength: 1, maxLength: 253, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });
/** Integers JavaScript holds exactly: a count of 1e20 is not a count but junk. */
const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
/**
 * A time in Unix ms that a Date can hold (±8.64e15, ECMA-262): the server prints it with
 * toISOString, which throws past that, so one agent's junk would fail every listing.
 */
const UnixMs = Type.Integer({ minimum: 0, maximum: 8.64e15 });
/**
 * A list from an agent, bounded so a report can never be absurd: far above any real
 * node (GPUs, fabrics, shards, sources per node), far below what would cost the server.
 */
const List = <T extends TSchema>(item: T, maxItems: number) => Type.Array(item, { maxItems });

/**
 * What one agent may report, in bytes and counts (packages/agent/README.md, "Report
 * bounds"). Each is far above what a real node sends (an 8-GPU node with a full model
 * cache reports a few tens of KiB, a GPU one to four short problems), and low enough that
 * 140 nodes at every bound cost the server little: the byte caps are what bounds a
 * report as a whole, since a few lists at their count and length bounds together would
 * pass them. The server refuses a heartbeat over a byte cap with 413 (`too_large`) and
 * records a `report-refused` event; the node's last accepted report stays in force.
 */
export const REPORT_LIMITS = {
  /** The node report (`report`) as JSON, in UTF-8 bytes: what the server keeps, stores and lists of a node. */
  reportBytes: 256 * 1024,
  /** A whole heartbeat body (the report, and the shard statuses with their log tails). */
  heartbeatBytes: 1024 * 1024,
  labels: 64,
  labelValueChars: 1024,
  gpus: 64,
  /** uuid, bus_id, name and class of a GPU. */
  gpuTextChars: 128,
  problemsPerGpu: 16,
  problemChars: 256,
  fabrics: 64,
  /** gpu_error. */
  errorChars: 1024,
  /** Cached files, estimated sources and source estimates, each list. */
  sources: 512,
  /** A source URL (http(s)://, llmgw://, a hub id or a path). */
  sourceChars: 2048,
  shards: 256,
  shardErrorChars: 16384,
  logTailChars: 65536,
} as const;
const L = REPORT_LIMITS;
const Source = Str({ minLength: 1, maxLength: L.sourceChars });

/**
 * Where the server reaches a node: an IP address or a host name, nothing else (format
 * `host`, see validate.ts). The server puts it into engine URLs (`http://ADDR:PORT`), so
 * a scheme, port, path, user info or space would let a report send client traffic
 * somewhere else than the node.
 */
const Host = Type.String({
  minLength: 1,
  maxLength: 253,
  format: 'host',
  failMessage: 'must be an IP address or a host name, without scheme, port or path (e.g. 10.0.0.5, fd00::5 or gpu-1.lan)',
});

/** One GPU as the agent saw it. `uuid` is the stable key; `index` can change after a GPU is lost. */
export const GpuReportSchema = Type.Object({
  index: Count,
  /** Absent for a GPU the driver lost: nvidia-smi can no longer name it. */
  uuid: Type.Optional(Str({ maxLength: L.gpuTextChars })),
  bus_id: Type.Optional(Str({ maxLength: L.gpuTextChars })),
  name: Str({ maxLength: L.gpuTextChars }),
  /** Short normalised class such as `H100-80GB`, `RTX-4090`, `L40S`. */
  class: Str({ maxLength: L.gpuTextChars }),
  /** Absent when nvidia-smi printed a sentinel such as `[N/A]`: unknown is not zero. */
  memory_total_mb: Type.Optional(Count),
  memory_used_mb: Type.Optional(Count),
  /** Empty when healthy. Any entry keeps the GPU out of placement. */
  problems: List(Str({ maxLength: L.problemChars }), L.problemsPerGpu),
});
export type GpuReport = Static<typeof GpuReportSchema>;

/**
 * What an agent says when a fetched file does not hash to the catalog's SHA-256: its
 * shard fails with this error, and the server finds it by the digest the catalog expects
 * ({@link failedChecksum}) to tell `ctl explain` which file it was (a model's or an adapter's).
 */
export function checksumMismatchText(url: string, expected: string, actual: string): string {
  return `${url} has SHA-256 ${actual}, but the catalog expects ${expected.toLowerCase()}: the file was deleted and is not served; fix the sha256 in the catalog or the file at its source`;
}

/** Whether `error` is {@link checksumMismatchText}'s for the file the catalog gives `sha256`. */
export function failedChecksum(error: string | undefined, sha256: string): boolean {
  return error?.includes(`, but the catalog expects ${sha256.toLowerCase()}:`) === true;
}

/** A model file an agent holds in its cache, verified against its SHA-256. */
export const CachedFileSchema = Type.Object({
  sha256: Str({ minLength: 64, maxLength: 64 }),
  /** The source it was fetched from (an http(s):// or llmgw:// URL). */
  source: Source,
  size_bytes: Count,
  /** When a shard last started on it (Unix ms). */
  last_used_ms: UnixMs,
  /** Whether a shard of this node uses it now (such a file is never evicted). */
  in_use: Type.Boolean(),
});
export type CachedFile = Static<typeof CachedFileSchema>;

export const NodeReportSchema = Type.Object({
  node_id: Id,
  hostname: Str({ maxLength: 253 }),
  /** Address (IP or host name; no scheme, port or path) at which the server reaches engines on this node. */
  mgmt_addr: Host,
  agent_version: Str({ maxLength: 128 }),
  // A Kubernetes label key is at most 317 characters (253 prefix, /, 63 name).
  labels: Type.Record(Type.String(), Type.String({ maxLength: L.labelValueChars }), {
    maxProperties: L.labels,
    propertyNames: { minLength: 1, maxLength: 317 },
  }),
  pool: Type.Optional(Str({ maxLength: 253 })),
  /** min(MemTotal, cgroup memory.max). Absent when the agent could not read it. */
  memory_total_mb: Type.Optional(Count),
  cpu_cores: Type.Optional(Count),
  gpus: List(GpuReportSchema, L.gpus),
  fabrics: List(Str({ minLength: 1, maxLength: 64 }), L.fabrics),
  /** A node-level GPU problem (driver not loaded, version mismatch). */
  gpu_error: Type.Optional(Str({ maxLength: L.errorChars })),
  /** The sources this agent has looked at (found or not); absent from agents that cannot estimate. */
  estimated_sources: Type.Optional(List(Str({ maxLength: L.sourceChars }), L.sources)),
  /** Working-set estimates of the GGUF sources the server asked about that exist on this node. */
  source_estimates: Type.Optional(
    List(
      Type.Object({
        source: Source,
        memory_mb: Count,
        weights_mb: Count,
        kv_cache_mb: Count,
        context_length: Count,
      }),
      L.sources,
    ),
  ),
  /**
   * Whether this agent runs `engine: command` profiles (`--allow-command-engine`). Absent
   * from agents older than the flag, which ran them unasked; placement treats absent as
   * allowed and only `false` as a refusal.
   */
  allow_command_engine: Type.Optional(Type.Boolean()),
  /** The model files in this agent's cache (`--model-cache`), for placement and `ctl files`. */
  files: Type.Optional(List(CachedFileSchema, L.sources)),
});
export type NodeReport = Static<typeof NodeReportSchema>;

/** A model file on its way into an agent's cache. */
export const DownloadProgressSchema = Type.Object({
  done_bytes: Count,
  /** Absent when the file server did not say (no Content-Length). */
  total_bytes: Type.Optional(Count),
  /** Over the last few seconds. */
  bytes_per_s: Count,
});
export type DownloadProgress = Static<typeof DownloadProgressSchema>;

export const ShardStates = ['starting', 'ready', 'failed', 'stopped'] as const;
export const ShardStatusSchema = Type.Object({
  id: Str({ minLength: 1 }),
  replica_id: Str({ minLength: 1 }),
  state: Type.Union(ShardStates.map((s) => Type.Literal(s))),
  pid: Type.Optional(Count),
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
  restarts: Type.Optional(Count),
  error: Type.Optional(Type.String({ maxLength: L.shardErrorChars })),
  /**
   * While the shard's model file is fetched (state `starting`): how far it got. Absent
   * once the file is in the cache, and for sources the engine reads. For a hub id that
   * vLLM or SGLang fetches itself, what the engine's log shows of it, best effort: absent
   * when the log shows no byte bar under way.
   */
  download: Type.Optional(DownloadProgressSchema),
  /**
   * The shard's model file (`file`) was fetched for it, not found in the cache: its size
   * and how long the transfer and check took. Sent until a heartbeat carrying it is
   * accepted, so a file that came between two heartbeats, never seen as `download`, is
   * still recorded (`download-done`) once. Absent from older agents.
   */
  fetched: Type.Optional(Type.Object({ bytes: Count, ms: Count })),
  /**
   * With `error`: the shard failed (or waits to retry) because a model or adapter file
   * could not be fetched or failed its check (a transfer error, a checksum mismatch, a file
   * too large), not because of its engine; recorded as `download-failed`, not
   * `engine-failed`. Absent from older agents, whose checksum mismatch the server still
   * tells by its text (`failedChecksum`).
   */
  download_failed: Type.Optional(Type.Boolean()),
  /** The end of the shard's log; sent only when it changed since the last heartbeat. */
  log_tail: Type.Optional(Type.String({ maxLength: L.logTailChars })),
});
export type ShardStatus = Static<typeof ShardStatusSchema>;

export const HeartbeatSchema = Type.Object({
  report: NodeReportSchema,
  shards: List(ShardStatusSchema, L.shards),
  /**
   * The heartbeat's version: strictly increasing over the node's heartbeats, across agent
   * restarts too. A server instance never lets a report or shard status replace one of a
   * higher `seq` it already holds, however it came (a pulled row, a reload, a restart).
   * Absent from older agents: their reports are ordered by when they arrived.
   */
  seq: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
});
export type Heartbeat = Static<typeof HeartbeatSchema>;

/** One shard the node should run, with everything needed to build the engine's command line. */
export const ShardAssignmentSchema = Type.Object({
  id: Str({ minLength: 1 }),
  replica_id: Str({ minLength: 1 }),
  /** The catalog name: engines serve the model under this name. */
  model: Str({ minLength: 1 }),
  profile: Str(),
  engine: Str(),
  source: Str(),
  rank: Count,
  shards: Type.Integer({ minimum: 1 }),
  /** GPU UUIDs for CUDA_VISIBLE_DEVICES; empty for a CPU shard. */
  gpus: Type.Array(Str()),
  gpu_indices: Type.Array(Count),
  args: Type.Array(Str()),
  env: Type.Record(Type.String(), Type.String()),
  command: Type.Optional(Type.Array(Str())),
  /** Rank 0's node address and port, for followers of a multi-node replica. */
  master_addr: Type.Optional(Str()),
  master_port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
  api_key: Type.Optional(Str()),
  startup_timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  /**
   * A model file the agent must fetch into its cache (or find there) and verify before
   * starting the engine, for an http(s):// or llmgw:// source. The agent puts the cached
   * file's path where `source` goes in the engine's command line.
   */
  file: Type.Optional(
    Type.Object({
      /** http(s)://…, or llmgw://NAME: fetched from this server's --models-dir with the node credential. */
      url: Str({ minLength: 1 }),
      sha256: Str({ minLength: 64, maxLength: 64 }),
      /** The catalog's `size_bytes` of the file, when it gives one. */
      size_bytes: Type.Optional(Count),
    }),
  ),
  /**
   * LoRA adapters the engine serves on its model (issue 31), each under its name as a
   * model name; a fetched one has its `file` like the model's, and the agent puts the
   * cached path where its `source` goes.
   */
  adapters: Type.Optional(
    List(
      Type.Object({
        name: Str({ minLength: 1, maxLength: 200 }),
        source: Str({ minLength: 1 }),
        file: Type.Optional(Type.Object({ url: Str({ minLength: 1 }), sha256: Str({ minLength: 64, maxLength: 64 }) })),
      }),
      1024,
    ),
  ),
  /** Adapters the engine holds loaded at once (vLLM's `--max-loras`); with `adapters` only. */
  max_loaded_adapters: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
});
export type ShardAssignment = Static<typeof ShardAssignmentSchema>;
/** One LoRA adapter of an assignment. */
export type AssignedAdapter = NonNullable<ShardAssignment['adapters']>[number];

/**
 * The answer to a heartbeat: an acknowledgement, plus what the server wants the agent
 * to look up before its next one. It carries no assignments: those travel on the
 * long-poll alone, so a reply cannot be older than what the agent already runs.
 */
export const HeartbeatReplySchema = Type.Object({
  node_id: Id,
  /** GGUF sources whose memory the server wants estimated (profiles without min_memory_gb). */
  estimate_sources: Type.Optional(Type.Array(Str({ minLength: 1 }))),
});
export type HeartbeatReply = Static<typeof HeartbeatReplySchema>;

/**
 * The answer to the long-poll (`GET /agent/v1/nodes/:id/assignments?after=VERSION`):
 * the full set of shards the node should run. Sent at once when the version differs
 * from `after` (always, for an agent that just started), else when it changes.
 */
export const AssignmentsReplySchema = Type.Object({
  node_id: Id,
  /** Bumped whenever this node's assignments change; the long-poll waits for a newer one. */
  version: Count,
  assignments: Type.Array(ShardAssignmentSchema),
});
export type AssignmentsReply = Static<typeof AssignmentsReplySchema>;

/**
 * The one call the join token is good for (`POST /agent/v1/join`): a node asks to join
 * under its id and gets a credential bound to that id, which every later heartbeat and
 * long-poll carries instead of the join token (packages/server/src/credentials/README.md).
 */
export const JoinRequestSchema = Type.Object({
  node_id: Id,
  /**
   * The agent's name for this join, random, kept in its state directory from before the
   * join is sent until its credential is saved: the same node id and join id again (a
   * retry whose reply was lost) is the same join, answered with a fresh credential that
   * replaces the one never received. Absent from older agents: a retry is refused (409).
   */
  join_id: Type.Optional(Type.String({ minLength: 16, maxLength: 128, pattern: '^[A-Za-z0-9_-]+$' })),
});
export type JoinRequest = Static<typeof JoinRequestSchema>;

export const JoinReplySchema = Type.Object({
  node_id: Id,
  /** The node's own secret; the server keeps only its hash. */
  credential: Type.String({ minLength: 16, maxLength: 256 }),
  /** `pending-approval` under `--join-approval manual` until `ctl nodes approve`. */
  state: Type.Union([Type.Literal('ready'), Type.Literal('pending-approval')]),
});
export type JoinReply = Static<typeof JoinReplySchema>;
