import type pg from 'pg';
import { USAGE_MINUTES_KEEP_MS, minuteOf, type StoredUsage, type UsageDelta } from './store.js';

// PostgresStore's usage rows (`usage`, `usage_minutes`), apart from the rest of its statements.

const FIELDS = ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const;

/** Deltas added up by `id`, in a fixed order (a row may be touched once per statement; a fixed order avoids deadlocks between instances). */
function sum(deltas: readonly UsageDelta[], id: (d: UsageDelta) => string): UsageDelta[] {
  const sums = new Map<string, UsageDelta>();
  for (const d of deltas) {
    const k = id(d);
    const s = sums.get(k);
    if (!s) sums.set(k, { ...d });
    else for (const f of FIELDS) s[f] += d[f];
  }
  return [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, d]) => d);
}

const columns = (ds: readonly UsageDelta[]) => [
  ds.map((d) => d.keyId),
  ds.map((d) => d.model),
  ds.map((d) => d.requests),
  ds.map((d) => d.errors),
  ds.map((d) => d.cancelled),
  ds.map((d) => d.promptTokens),
  ds.map((d) => d.completionTokens),
];

/**
 * One transaction: the totals (`usage`), each delta's minute (`usage_minutes`), and the
 * minutes older than `USAGE_MINUTES_KEEP_MS` before the batch's newest pruned.
 */
export async function addUsageRows(pool: pg.Pool, deltas: readonly UsageDelta[]): Promise<void> {
  const totals = sum(deltas, (d) => JSON.stringify([d.keyId, d.model]));
  if (!totals.length) return;
  const minutes = sum(
    deltas.filter((d) => d.minuteMs !== undefined),
    (d) => JSON.stringify([d.keyId, d.model, d.minuteMs]),
  );
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(
      `INSERT INTO usage (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
       ON CONFLICT (key_id, model) DO UPDATE SET requests = usage.requests + excluded.requests,
         errors = usage.errors + excluded.errors, cancelled = usage.cancelled + excluded.cancelled,
         prompt_tokens = usage.prompt_tokens + excluded.prompt_tokens, completion_tokens = usage.completion_tokens + excluded.completion_tokens`,
      columns(totals),
    );
    if (minutes.length) {
      const u = 'usage_minutes';
      await c.query(
        `INSERT INTO ${u} (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens, minute_ms)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
         ON CONFLICT (key_id, model, minute_ms) DO UPDATE SET requests = ${u}.requests + excluded.requests,
           errors = ${u}.errors + excluded.errors, cancelled = ${u}.cancelled + excluded.cancelled,
           prompt_tokens = ${u}.prompt_tokens + excluded.prompt_tokens, completion_tokens = ${u}.completion_tokens + excluded.completion_tokens`,
        [...columns(minutes), minutes.map((d) => d.minuteMs!)],
      );
      const newest = Math.max(...minutes.map((d) => d.minuteMs!));
      await c.query(`DELETE FROM ${u} WHERE minute_ms < $1`, [newest - USAGE_MINUTES_KEEP_MS]);
    }
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

/** Usage per key and model (totals, or the minutes from `sinceMs`'s), with the key's name where the key is still stored. */
export async function loadUsageRows(pool: pg.Pool, sinceMs?: number): Promise<StoredUsage[]> {
  const order = 'ORDER BY COALESCE(k.name, u.key_id) COLLATE "C", u.model COLLATE "C"';
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
    sinceMs === undefined
      ? `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, u.requests, u.errors, u.cancelled, u.prompt_tokens, u.completion_tokens
         FROM usage u LEFT JOIN api_keys k ON k.id = u.key_id ${order}`
      : `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, sum(u.requests) AS requests, sum(u.errors) AS errors,
           sum(u.cancelled) AS cancelled, sum(u.prompt_tokens) AS prompt_tokens, sum(u.completion_tokens) AS completion_tokens
         FROM usage_minutes u LEFT JOIN api_keys k ON k.id = u.key_id WHERE u.minute_ms >= $1
         GROUP BY u.key_id, k.name, u.model ${order}`,
    sinceMs === undefined ? [] : [minuteOf(sinceMs)],
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
