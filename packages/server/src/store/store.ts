import type { EventView, NodeReport, TokenRole } from '@llmgw/shared';
import type { AdminState, Replica } from '../domain.js';

/** A client API key as stored: the secret only as its SHA-256. */
export interface StoredKey {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  models: string[];
  rpm?: number;
  maxConcurrent?: number;
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
}

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
}

/**
 * What must survive a server restart. An interface so a PostgreSQL implementation can
 * serve several server instances later; SQLite (one file, no setup) is the default.
 * Liveness is not stored: it is soft state, rebuilt from heartbeats.
 */
export interface Store {
  loadNodes(): StoredNode[];
  saveNodeAdmin(id: string, admin: AdminState): void;
  saveNodeReport(id: string, report: NodeReport, lastSeenMs: number): void;
  /** Forgets a node: its row and its credential (`ctl nodes delete`). */
  deleteNode(id: string): void;
  loadCredentials(): StoredCredential[];
  /** Adds or replaces the credential of `c.nodeId`. */
  saveCredential(c: StoredCredential): void;
  loadReplicas(): StoredReplica[];
  /** Writes a replica; its `apiKey`, if any, is never written. */
  saveReplica(replica: Replica): void;
  deleteReplica(id: string): void;
  loadKeys(): StoredKey[];
  saveKey(key: StoredKey): void;
  addUsage(deltas: UsageDelta[]): void;
  loadTokens(): StoredToken[];
  saveToken(token: StoredToken): void;
  loadUsage(): StoredUsage[];
  /** Appends events (their ids given, increasing) and prunes what `keep` no longer covers, in one transaction. */
  addEvents(events: StoredEvent[], keep: EventRetention): void;
  /** The newest `limit` events kept, oldest first. */
  loadEvents(limit: number): StoredEvent[];
  /**
   * Runs `fn` as one transaction: every write inside it lands, or none does. Synchronous
   * like the rest of the interface; nested calls join the outer transaction.
   */
  transaction<T>(fn: () => T): T;
  /** A write that changes nothing, to learn whether writes work again after a failure. */
  probe(): void;
  close(): void;
}
