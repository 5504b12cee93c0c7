import type { EventView, NodeReport, Priority, ShardStatus, TokenRole } from '@llmgw/shared';
import type { AdminState, Replica, RolloutControl, RolloutHistory, RolloutRecord } from '../domain.js';

/** A client API key as stored: the secret only as its SHA-256. */
export interface StoredKey {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  models: string[];
  rpm?: number;
  maxConcurrent?: number;
  /** Prompt + completion tokens per minute (sliding window); absent = unlimited. */
  tpm?: number;
  /** Its band when requests wait in the gateway; absent = standard. */
  priority?: Priority;
  expiresAt?: string;
  createdAt: string;
  revokedAt?: string;
}

/** Usage added up per key and model since the last flush. */
export interface UsageDelta {
  keyId: string;
  model: string;
  requests: number;
  errors: number;
  /** Requests the client left mid-stream; their streamed tokens are in the token counts. */
  cancelled: number;
  promptTokens: number;
  completionTokens: number;
  /**
   * The minute (epoch ms, a multiple of 60 000) the requests ended in: also added to that
   * minute's row of `usage_minutes`, which `loadUsage(sinceMs)` sums. Absent: the totals only.
   */
  minuteMs?: number;
}

/** The counting columns of `usage` and `usage_minutes`, in both stores. */
export const USAGE_COLUMNS = ['requests', 'errors', 'cancelled', 'prompt_tokens', 'completion_tokens'] as const;

/** How long per-minute usage is kept (`ctl usage --since` reaches back this far); pruned on write. */
export const USAGE_MINUTES_KEEP_MS = 31 * 24 * 3600_000;

/** The minute `ms` is in, as `usage_minutes` counts it. */
export const minuteOf = (ms: number): number => Math.floor(ms / 60_000) * 60_000;
/** The largest count a usage column holds: sums saturate here, so no row overflows `bigint` and each reads back exactly as a JS number. */
export const MAX_USAGE_COUNT = Number.MAX_SAFE_INTEGER;

/** `a + b`, held at {@link MAX_USAGE_COUNT}. */
export const saturatingAdd = (a: number, b: number): number => Math.min(a + b, MAX_USAGE_COUNT);

export interface StoredUsage extends UsageDelta {
  keyName: string;
}

/**
 * A replica as stored: without its engine key, which is derived from the server's
 * engine-key secret and the replica id when the replica is loaded (see `engineKeys`).
 */
export type StoredReplica = Omit<Replica, 'apiKey'> & { apiKey?: string };

/** The roles a token of the admin listener may have (see api/access.ts). */
export type { TokenRole };

/** A token of the admin listener as stored: the secret only as its SHA-256, like a client key. */
export interface StoredToken {
  id: string;
  name: string;
  role: TokenRole;
  hash: string;
  prefix: string;
  createdAt: string;
  revokedAt?: string;
}

/** A node's credential as stored: the secret only as its SHA-256 (hex). */
export interface StoredCredential {
  nodeId: string;
  hash: string;
  createdAt: string;
  /** The SHA-256 of the join id the agent sent with the join that issued it (issue 28); absent for a join without one. */
  joinHash?: string;
}

/** An event as stored: its view (`EventView`), ordered by id. */
export type StoredEvent = EventView;

/** How many events the store keeps: the newest `maxRows`, none older than `sinceMs`. */
export interface EventRetention {
  sinceMs: number;
  maxRows: number;
}

export interface StoredNode {
  id: string;
  admin: AdminState;
  report?: NodeReport;
  lastSeenMs?: number;
  /** The shard statuses of the node's last heartbeat (PostgreSQL only: other instances derive replica states from them). */
  shards?: ShardStatus[];
  /** The `seq` of the heartbeat the report and shards are from (PostgreSQL only; absent for older agents). */
  seq?: number;
}

/** One node's latest heartbeat, as written in a batch. */
export interface NodeReportRow {
  id: string;
  report: NodeReport;
  lastSeenMs: number;
  shards?: ShardStatus[];
  /** Its `seq`: a row already holding a higher one is left as it is. */
  seq?: number;
}

/**
 * The lease a leader writes under (see cluster/lease.ts): a write whose epoch is no
 * longer the lease's, or whose lease has expired, is refused with `not_leader`, so a
 * leader that was paused past its lease cannot change anything when it resumes.
 */
export interface Fence {
  holder: string;
  epoch: number;
}

/**
 * What must survive a server restart, and what several server instances share. SQLite
 * (one file, no setup) is the default for one instance; PostgreSQL serves several.
 * Asynchronous because PostgreSQL is across a network; SQLite answers at once.
 * Liveness is not stored on SQLite: it is soft state, rebuilt from heartbeats.
 */
export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  loadNodes(): Promise<StoredNode[]>;
  saveNodeAdmin(id: string, admin: AdminState): Promise<void>;
  /**
   * Writes each node's latest report in one transaction (heartbeats are batched). PostgreSQL
   * resolves the database's clock at the write (each row's `lastSeenMs`): an instance knows
   * its own write when a pull brings it back.
   */
  saveNodeReports(rows: readonly NodeReportRow[]): Promise<number | void>;
  /** Forgets a node: its row and its credential (`ctl nodes delete`). */
  deleteNode(id: string): Promise<void>;
  loadCredentials(): Promise<StoredCredential[]>;
  /**
   * Adds the credential of `c.nodeId` in one statement that does nothing when the node
   * already has one, and says whether it was added: two joins of one id, on one instance
   * or several, can never both be issued a credential. The one exception is the same join
   * again (a retry whose first reply was lost): a credential with `c.joinHash` set that
   * matches the stored one's is replaced by `c`, in the same statement, so the node still
   * has exactly one live credential.
   */
  addCredential(c: StoredCredential): Promise<boolean>;
  loadReplicas(): Promise<StoredReplica[]>;
  /**
   * Saves and deletes replicas in one transaction: a reconcile pass lands whole or not
   * at all. A replica's `apiKey` is never written. With `fence`, only while that lease
   * still holds (else `not_leader`, and nothing is written).
   */
  writeReplicas(save: readonly Replica[], remove: readonly string[], fence?: Fence): Promise<void>;
  loadKeys(): Promise<StoredKey[]>;
  saveKey(key: StoredKey): Promise<void>;
  /**
   * Adds the deltas to the stored sums (each saturating at {@link MAX_USAGE_COUNT}), and
   * those with a minute to that minute's row. Resolves with the rows refused for their
   * values, skipped while the others are written (the caller reports them); throws when
   * the store itself fails.
   */
  addUsage(deltas: readonly UsageDelta[]): Promise<UsageDelta[]>;
  /**
   * Usage per key and model: the totals since the store was created, or with `sinceMs`
   * the sum of the minutes from the one `sinceMs` is in (the last `USAGE_MINUTES_KEEP_MS`).
   */
  loadUsage(sinceMs?: number): Promise<StoredUsage[]>;
  loadTokens(): Promise<StoredToken[]>;
  saveToken(token: StoredToken): Promise<void>;
  /**
   * Appends events and prunes what `keep` no longer covers, in one transaction. Returns
   * them as stored: SQLite keeps the given ids; PostgreSQL gives each a new, increasing
   * id from a sequence (several instances write events).
   */
  addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]>;
  /** The newest `limit` events kept, oldest first; with `afterId`, only those with a larger id. */
  loadEvents(limit: number, afterId?: number): Promise<StoredEvent[]>;
  /** What is stored of each model's rollouts (`ctl rollout`): control and history, merged. */
  loadRollouts(): Promise<RolloutRecord[]>;
  /** The planning instance's part of a model's rollout record: its revisions and a halt. */
  saveRolloutHistory(model: string, h: RolloutHistory): Promise<void>;
  /** The operator's part (`ctl rollout pause|resume`), written apart so neither undoes the other. */
  saveRolloutControl(model: string, c: RolloutControl): Promise<void>;
  /** A write that changes nothing, to learn whether writes work again after a failure. */
  probe(): Promise<void>;
  close(): Promise<void>;
}
