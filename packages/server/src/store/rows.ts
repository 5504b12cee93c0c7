import type { StoredKey } from './store.js';

/** An `api_keys` row as both stores hold it (`models` already parsed from SQLite's JSON text). */
export interface KeyRow {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  models: string[];
  rpm: number | null;
  max_concurrent: number | null;
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
    ...(r.expires_at ? { expiresAt: r.expires_at } : {}),
    createdAt: r.created_at,
    ...(r.revoked_at ? { revokedAt: r.revoked_at } : {}),
  };
}
