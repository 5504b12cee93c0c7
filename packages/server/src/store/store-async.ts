/**
 * TEMPORARY: the asynchronous Store contract of issue 16, copied verbatim until the
 * lead's store.ts with it is on main; removed by the rebase onto it.
 */
import type { NodeReport, ShardStatus } from '@llmgw/shared';
import type { AdminState, Replica } from '../domain.js';
import type { EventRetention, StoredCredential, StoredEvent, StoredKey, StoredReplica, StoredToken, StoredUsage, UsageDelta } from './store.js';

export type { EventRetention, StoredCredential, StoredEvent, StoredKey, StoredReplica, StoredToken, StoredUsage, UsageDelta };

export interface StoredNode { id: string; admin: AdminState; report?: NodeReport; lastSeenMs?: number;
  /** The shard statuses of the node's last heartbeat (PostgreSQL only: other instances derive replica states from them). */
  shards?: ShardStatus[]; }
/** One node's latest heartbeat, as written in a batch. */
export interface NodeReportRow { id: string; report: NodeReport; lastSeenMs: number; shards?: ShardStatus[] }
/** The lease epoch a leader writes under: a write with a stale one is refused (DomainError 'not_leader'). */
export interface Fence { holder: string; epoch: number }
export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  loadNodes(): Promise<StoredNode[]>;
  saveNodeAdmin(id: string, admin: AdminState): Promise<void>;
  /** Writes each node's latest report in one transaction (heartbeats are batched). */
  saveNodeReports(rows: readonly NodeReportRow[]): Promise<void>;
  deleteNode(id: string): Promise<void>;
  loadCredentials(): Promise<StoredCredential[]>;
  saveCredential(c: StoredCredential): Promise<void>;
  loadReplicas(): Promise<StoredReplica[]>;
  /** Saves and deletes replicas in one transaction; with `fence`, only while that lease still holds. */
  writeReplicas(save: readonly Replica[], remove: readonly string[], fence?: Fence): Promise<void>;
  loadKeys(): Promise<StoredKey[]>;
  saveKey(key: StoredKey): Promise<void>;
  addUsage(deltas: readonly UsageDelta[]): Promise<void>;
  loadUsage(): Promise<StoredUsage[]>;
  loadTokens(): Promise<StoredToken[]>;
  saveToken(token: StoredToken): Promise<void>;
  /** Appends events and prunes what `keep` no longer covers, in one transaction. Returns them as
   *  stored: SQLite keeps the given ids; PostgreSQL gives each a new id from a sequence, increasing. */
  addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]>;
  /** The newest `limit` events kept, oldest first; with `afterId`, only those with a larger id. */
  loadEvents(limit: number, afterId?: number): Promise<StoredEvent[]>;
  probe(): Promise<void>;
  close(): Promise<void>;
}
