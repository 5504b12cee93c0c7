import type pg from 'pg';
import { MAX_USAGE_COUNT, saturatingAdd, type StoredUsage, type UsageDelta } from './store.js';

// PostgresStore's usage rows (`usage`), apart from the rest of its statements.

const FIELDS = ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const;
const COLUMNS = ['requests', 'errors', 'cancelled', 'prompt_tokens', 'completion_tokens'] as const;

/**
 * Adds `deltas` in one statement; deltas for the same key and model are added up first
 * (a row may be touched once per statement), and every sum saturates at
 * {@link MAX_USAGE_COUNT}. When the statement is refused for its data (SQLSTATE class
 * 22 or 23: a value the column cannot take), each row is written alone, so one bad row
 * costs only itself: the rows refused are returned (the caller reports them), the rest
 * are written. Any other failure (the database is away) throws, for the caller to retry.
 */
export async function addUsageRows(pool: pg.Pool, deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
  const sums = new Map<string, UsageDelta>();
  for (const d of deltas) {
    const k = JSON.stringify([d.keyId, d.model]);
    const s = sums.get(k);
    if (!s) sums.set(k, { ...d });
    else for (const f of FIELDS) s[f] = saturatingAdd(s[f], d[f]);
  }
  const ds = [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, d]) => d);
  if (!ds.length) return [];
  try {
    await upsert(pool, ds);
    return [];
  } catch (err) {
    if (!isDataError(err)) throw err;
    if (ds.length === 1) return ds;
  }
  const refused: UsageDelta[] = [];
  for (const d of ds) {
    try {
      await upsert(pool, [d]);
    } catch (err) {
      if (!isDataError(err)) throw err;
      refused.push(d);
    }
  }
  return refused;
}

/** A refusal of the values themselves (out of range, not a number, a constraint), not of the connection. */
function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'));
}

async function upsert(pool: pg.Pool, ds: readonly UsageDelta[]): Promise<void> {
  // numeric for the sum: bigint + bigint would overflow before LEAST could hold it.
  const set = COLUMNS.map((c) => `${c} = LEAST(usage.${c}::numeric + excluded.${c}, ${MAX_USAGE_COUNT})::bigint`).join(', ');
  await pool.query(
    `INSERT INTO usage (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
     ON CONFLICT (key_id, model) DO UPDATE SET ${set}`,
    [ds.map((d) => d.keyId), ds.map((d) => d.model), ...FIELDS.map((f) => ds.map((d) => d[f]))],
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
