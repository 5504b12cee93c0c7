import type pg from 'pg';
import type { StoredUsage, UsageDelta } from './store.js';

// PostgresStore's usage rows (`usage`), apart from the rest of its statements.

/** One statement; deltas for the same key and model are added up first (a row may be touched once per statement). */
export async function addUsageRows(pool: pg.Pool, deltas: readonly UsageDelta[]): Promise<void> {
  const sums = new Map<string, UsageDelta>();
  for (const d of deltas) {
    const k = JSON.stringify([d.keyId, d.model]);
    const s = sums.get(k);
    if (!s) sums.set(k, { ...d });
    else for (const f of ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const) s[f] += d[f];
  }
  const ds = [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, d]) => d);
  if (!ds.length) return;
  await pool.query(
    `INSERT INTO usage (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
     ON CONFLICT (key_id, model) DO UPDATE SET requests = usage.requests + excluded.requests,
       errors = usage.errors + excluded.errors, cancelled = usage.cancelled + excluded.cancelled,
       prompt_tokens = usage.prompt_tokens + excluded.prompt_tokens, completion_tokens = usage.completion_tokens + excluded.completion_tokens`,
    [
      ds.map((d) => d.keyId),
      ds.map((d) => d.model),
      ds.map((d) => d.requests),
      ds.map((d) => d.errors),
      ds.map((d) => d.cancelled),
      ds.map((d) => d.promptTokens),
      ds.map((d) => d.completionTokens),
    ],
  );
}

/** Usage per key and model, with the key's name where the key is still stored. */
export async function loadUsageRows(pool: pg.Pool): Promise<StoredUsage[]> {
  const { rows } = await pool.query<{
    key_id: string;
    key_name: string;
    model: string;
    requests: string;
    errors: string;
    cancelled: string;
    prompt_tokens: string;
    completion_tokens: string;
  }>(
    `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, u.requests, u.errors, u.cancelled, u.prompt_tokens, u.completion_tokens
     FROM usage u LEFT JOIN api_keys k ON k.id = u.key_id ORDER BY COALESCE(k.name, u.key_id) COLLATE "C", u.model COLLATE "C"`,
  );
  return rows.map((r) => ({
    keyId: r.key_id,
    keyName: r.key_name,
    model: r.model,
    requests: Number(r.requests),
    errors: Number(r.errors),
    cancelled: Number(r.cancelled),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
  }));
}
