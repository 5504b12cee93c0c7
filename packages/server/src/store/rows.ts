import { NodeAdminStates, NodeReportSchema, PRIORITIES, ShardStatusSchema, validate, type NodeReport, type Priority, type ShardStatus } from '@llmgw/shared';
import type { AdminState, RevisionEntry, RolloutRecord } from '../domain.js';
import type { StoredCredential, StoredKey, StoredNode, USAGE_COLUMNS, UsageDelta } from './store.js';

/** An `api_keys` row as both stores hold it (`models` already parsed from SQLite's JSON text). */
export interface KeyRow {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  models: string[];
  rpm: number | null;
  max_concurrent: number | null;
  /** Absent in a database from before the column (read by `migrate --from-sqlite`). */
  priority?: string | null;
  /** Absent in a database from before the column; a string from PostgreSQL's bigint. */
  tpm?: number | string | null;
  expires_at: string | null;
  created_at: string;
  revoked_at: string | null;
}

/** A key as the rest of the server sees it: absent fields rather than NULLs. */
export function keyFromRow(r: KeyRow): StoredKey {
  return {
    id: r.id,
    name: r.name,
    hash: r.hash,
    prefix: r.prefix,
    models: r.models,
    ...(r.rpm != null ? { rpm: r.rpm } : {}),
    ...(r.max_concurrent != null ? { maxConcurrent: r.max_concurrent } : {}),
    ...(r.tpm != null ? { tpm: Number(r.tpm) } : {}),
    // A value this server does not know (a newer one wrote it) reads as the default.
    ...((PRIORITIES as readonly string[]).includes(r.priority ?? '') ? { priority: r.priority as Priority } : {}),
    ...(r.expires_at ? { expiresAt: r.expires_at } : {}),
    createdAt: r.created_at,
    ...(r.revoked_at ? { revokedAt: r.revoked_at } : {}),
  };
}

/** A `nodes` row of the PostgreSQL store. */
/** A `node_credentials` row, as both stores read it. */
export interface CredentialRow {
  node_id: string;
  hash: string;
  created_at: string;
  join_hash: string | null;
}

/** A credential from its row; `joinHash` only where the join sent a join id. */
export function credentialOf(r: CredentialRow): StoredCredential {
  return { nodeId: r.node_id, hash: r.hash, createdAt: r.created_at, ...(r.join_hash ? { joinHash: r.join_hash } : {}) };
}

/** A row of `usage` or `usage_minutes` as either store reads it: PostgreSQL's bigint comes as a string. */
export type UsageCountRow = Record<(typeof USAGE_COLUMNS)[number], number | string> & { key_id: string; model: string };

/** A usage row's counts, as numbers (the store holds each at MAX_USAGE_COUNT, so `Number` is exact). */
export function usageOfRow(r: UsageCountRow): UsageDelta {
  return {
    keyId: r.key_id,
    model: r.model,
    requests: Number(r.requests),
    errors: Number(r.errors),
    cancelled: Number(r.cancelled),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
  };
}

export interface NodeRow {
  id: string;
  admin: AdminState;
  report: NodeReport | null;
  shards: ShardStatus[] | null;
  last_seen_ms: string | null;
  seq?: string | null;
}

/**
 * A node row as the rest of the server may trust it. Rows are read every half second on
 * PostgreSQL, so one hand-edited or torn row must not stop planning for the whole fleet:
 * a report or shard list that is not one is left out (the next heartbeat brings a good
 * one), and an admin state that is not one reads as cordoned, saying why, rather than
 * dropping the node (which would forget it).
 */
export function toNode(r: NodeRow): StoredNode {
  const report = r.report && validate(NodeReportSchema, r.report).ok ? r.report : undefined;
  const shards = Array.isArray(r.shards) && r.shards.every((s) => validate(ShardStatusSchema, s).ok) ? r.shards : undefined;
  return {
    id: r.id,
    admin: isAdmin(r.admin) ? r.admin : { state: 'cordoned', reason: 'its admin state in the database was unreadable: set it again (ctl cordon or uncordon)' },
    ...(report ? { report } : {}),
    ...(r.last_seen_ms != null ? { lastSeenMs: Number(r.last_seen_ms) } : {}),
    ...(shards ? { shards } : {}),
    ...(r.seq != null && Number.isSafeInteger(Number(r.seq)) ? { seq: Number(r.seq) } : {}),
  };
}

function isAdmin(v: unknown): v is AdminState {
  const a = v as Partial<AdminState> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    (NodeAdminStates as readonly unknown[]).includes(a.state) &&
    (a.reason === undefined || typeof a.reason === 'string') &&
    (a.changedAt === undefined || typeof a.changedAt === 'string')
  );
}

/** The number of revisions kept per model: `ctl rollout history` is for the recent past. */
export const ROLLOUT_HISTORY_KEPT = 20;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A `rollouts` row as the server uses it, from its two JSON documents. The database is
 * input like any other: an entry of the wrong shape (a hand edit, a bug of another
 * version) is dropped, never thrown, so one bad row cannot stop a pass.
 */
export function rolloutFromRow(model: string, history: unknown, control: unknown): RolloutRecord {
  const h = isObject(history) ? history : {};
  const c = isObject(control) ? control : {};
  const entries = (Array.isArray(h.history) ? h.history : []).filter(
    (e): e is RevisionEntry =>
      isObject(e) && typeof e.revision === 'string' && typeof e.sinceMs === 'number' && typeof e.change === 'string' && isObject(e.content),
  );
  const halted =
    isObject(h.halted) && typeof h.halted.revision === 'string' && typeof h.halted.reason === 'string' && typeof h.halted.atMs === 'number'
      ? (h.halted as RolloutRecord['halted'])
      : undefined;
  const resumed =
    isObject(c.resumed) && typeof c.resumed.revision === 'string' && typeof c.resumed.atMs === 'number' ? (c.resumed as RolloutRecord['resumed']) : undefined;
  return {
    model,
    history: entries.slice(-ROLLOUT_HISTORY_KEPT),
    ...(halted ? { halted } : {}),
    ...(c.paused === true ? { paused: true } : {}),
    ...(resumed ? { resumed } : {}),
  };
}
