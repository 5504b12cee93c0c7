import type pg from 'pg';
import { MAX_USAGE_COUNT, USAGE_COLUMNS, USAGE_MINUTES_KEEP_MS, minuteOf, saturatingAdd, type StoredUsage, type UsageDelta } from './store.js';
import { usageOfRow, type UsageCountRow } from './rows.js';

// PostgresStore's usage rows (`usage`, `usage_minutes`), apart from the rest of its statements.

const FIELDS = ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const;

/**
 * Deltas added up by `id` (each sum saturating at {@link MAX_USAGE_COUNT}), in a fixed
 * order: a row may be touched once per statement, and a fixed order avoids deadlocks
 * between instances.
 */
function sum(deltas: readonly UsageDelta[], id: (d: UsageDelta) => string): UsageDelta[] {
  const sums = new Map<string, UsageDelta>();
  for (const d of deltas) {
    const k = id(d);
    const s = sums.get(k);
    if (!s) sums.set(k, { ...d });
    else for (const f of FIELDS) s[f] = saturatingAdd(s[f], d[f]);
  }
  return [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, d]) => d);
}

const columns = (ds: readonly UsageDelta[]) => [ds.map((d) => d.keyId), ds.map((d) => d.model), ...FIELDS.map((f) => ds.map((d) => d[f]))];

/**
 * Adds `deltas`: the totals (`usage`), each delta's minute (`usage_minutes`), and the
 * minutes older than `USAGE_MINUTES_KEEP_MS` before the batch's newest pruned, in one
 * transaction; every sum saturates at {@link MAX_USAGE_COUNT}. When the batch is refused
 * for its data (SQLSTATE class 22 or 23: a value a column cannot take), each delta is
 * written alone, so one bad row costs only itself: the deltas refused are returned (the
 * caller reports them), the rest are written. Any other failure (the database is away)
 * throws, for the caller to retry.
 */
export async function addUsageRows(pool: pg.Pool, deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
  if (!deltas.length) return [];
  try {
    await writeBatch(pool, deltas);
    return [];
  } catch (err) {
    if (!isDataError(err)) throw err;
    if (deltas.length === 1) return [...deltas];
  }
  const refused: UsageDelta[] = [];
  for (const d of deltas) {
    try {
      await writeBatch(pool, [d]);
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

/** `table.c = LEAST(table.c + excluded.c, MAX)` for each count: numeric for the sum, as bigint + bigint would overflow before LEAST could hold it. */
const saturating = (table: string) => USAGE_COLUMNS.map((c) => `${c} = LEAST(${table}.${c}::numeric + excluded.${c}, ${MAX_USAGE_COUNT})::bigint`).join(', ');

async function writeBatch(pool: pg.Pool, deltas: readonly UsageDelta[]): Promise<void> {
  const totals = sum(deltas, (d) => JSON.stringify([d.keyId, d.model]));
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
       ON CONFLICT (key_id, model) DO UPDATE SET ${saturating('usage')}`,
      columns(totals),
    );
    if (minutes.length) {
      const u = 'usage_minutes';
      await c.query(
        `INSERT INTO ${u} (key_id, model, requests, errors, cancelled, prompt_tokens, completion_tokens, minute_ms)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
         ON CONFLICT (key_id, model, minute_ms) DO UPDATE SET ${saturating(u)}`,
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
  const { rows } = await pool.query<UsageCountRow & { key_name: string }>(
    sinceMs === undefined
      ? `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model, u.requests, u.errors, u.cancelled, u.prompt_tokens, u.completion_tokens
         FROM usage u LEFT JOIN api_keys k ON k.id = u.key_id ${order}`
      : `SELECT u.key_id, COALESCE(k.name, u.key_id) AS key_name, u.model,
           ${USAGE_COLUMNS.map((c) => `LEAST(sum(u.${c}), ${MAX_USAGE_COUNT}) AS ${c}`).join(', ')}
         FROM usage_minutes u LEFT JOIN api_keys k ON k.id = u.key_id WHERE u.minute_ms >= $1
         GROUP BY u.key_id, k.name, u.model ${order}`,
    sinceMs === undefined ? [] : [minuteOf(sinceMs)],
  );
  return rows.map((r) => ({ ...usageOfRow(r), keyName: r.key_name }));
}
