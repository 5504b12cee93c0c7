import type pg from 'pg';
import { DB_MS } from './pg-schema.js';
import { toNode, type NodeRow } from './rows.js';
import type { NodeReportRow, StoredNode } from './store.js';

// PostgresStore's heartbeat rows (`nodes`: the batched writes and the pulls), apart from the rest of its statements.

export const NODE_COLUMNS = 'n.id, n.admin, n.report, n.shards, n.last_seen_ms, n.seq';

/** How many of its own batches' times a store remembers at most (a pull forgets those behind its cursor). */
const OWN_BATCHES_KEPT = 256;

/**
 * The database clock of each batch of reports this store wrote, oldest first: a row a
 * pull finds stamped with one of them (`last_seen_ms` = `updated_ms` = that time) is this
 * instance's own write, which it holds already.
 */
export type OwnBatches = number[];

/**
 * One statement for the whole batch; resolves the database's clock it stamped every row
 * with (none for an empty batch). See `PostgresStore.saveNodeReports`.
 */
export async function saveReportRows(pool: pg.Pool, own: OwnBatches, rows: readonly NodeReportRow[]): Promise<number | void> {
  const latest = [...new Map(rows.map((r) => [r.id, r])).values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (!latest.length) return;
  // The batch goes as one jsonb array: about twice as fast as unnest() over arrays of
  // JSON strings, which the driver must escape as array literals.
  // A row holding a later heartbeat (another instance wrote it meanwhile) keeps it: the
  // report and shards, and the liveness that heartbeat already proved.
  // `t` is read once (a CTE with a volatile function); the INSERT in a WITH always runs whole.
  const { rows: at } = await pool.query<{ ms: string }>(
    `WITH t AS (SELECT ${DB_MS} AS ms), w AS (INSERT INTO nodes (id, admin, report, shards, last_seen_ms, updated_ms, seq)
     SELECT r->>'id', '{"state":"ready"}'::jsonb, r->'report', NULLIF(r->'shards', 'null'::jsonb), t.ms, t.ms, (r->>'seq')::bigint
     FROM jsonb_array_elements($1::jsonb) AS r, t
     ON CONFLICT (id) DO UPDATE SET report = excluded.report, shards = excluded.shards,
       last_seen_ms = excluded.last_seen_ms, updated_ms = excluded.updated_ms, seq = excluded.seq
     WHERE nodes.seq IS NULL OR excluded.seq IS NULL OR excluded.seq >= nodes.seq)
     SELECT ms FROM t`,
    [JSON.stringify(latest.map((r) => ({ id: r.id, report: r.report, shards: r.shards ?? null, seq: r.seq ?? null })))],
  );
  const ms = Number(at[0]!.ms);
  own.push(ms);
  if (own.length > OWN_BATCHES_KEPT) own.splice(0, own.length - OWN_BATCHES_KEPT);
  return ms;
}

/**
 * The node rows written since `sinceMs` (DB ms) but this store's own batches (issue 32:
 * every pull re-read and re-validated every changed row, its own instance's included),
 * and the database's clock in the same query. A row another instance wrote in the very
 * millisecond of one of ours is left out too, until its next write or the full reload.
 */
export async function loadChangedRows(pool: pg.Pool, own: OwnBatches, sinceMs: number): Promise<{ nodes: StoredNode[]; dbNowMs: number }> {
  const behind = own.findIndex((ms) => ms > sinceMs);
  own.splice(0, behind < 0 ? own.length : behind);
  const { rows } = await pool.query<NodeRow & { id: string | null; db_now_ms: string }>(
    `SELECT t.db_now_ms, ${NODE_COLUMNS} FROM (SELECT ${DB_MS} AS db_now_ms) t
     LEFT JOIN nodes n ON n.updated_ms > $1 AND NOT (n.updated_ms = ANY($2::bigint[]) AND n.last_seen_ms IS NOT DISTINCT FROM n.updated_ms)
     ORDER BY n.id COLLATE "C"`,
    [sinceMs, own],
  );
  return { nodes: rows.filter((r) => r.id !== null).map(toNode), dbNowMs: Number(rows[0]!.db_now_ms) };
}

/**
 * Every node row without its report and shards (so none is parsed or validated), and
 * the database's clock in the same query: what the periodic full reload reads first,
 * reading whole only the rows it lacks (`cluster/whole-rows.ts`). At 25,000 nodes the
 * whole rows are tens of MB every reload.
 */
export async function loadHeadRows(pool: pg.Pool): Promise<{ heads: StoredNode[]; dbNowMs: number }> {
  const { rows } = await pool.query<NodeRow & { id: string | null; db_now_ms: string }>(
    `SELECT t.db_now_ms, n.id, n.admin, NULL::jsonb AS report, NULL::jsonb AS shards, n.last_seen_ms, n.seq
     FROM (SELECT ${DB_MS} AS db_now_ms) t LEFT JOIN nodes n ON true ORDER BY n.id COLLATE "C"`,
  );
  return { heads: rows.filter((r) => r.id !== null).map(toNode), dbNowMs: Number(rows[0]!.db_now_ms) };
}

/** The whole rows of the nodes `ids` (those still stored), in id order. */
export async function loadRowsOf(pool: pg.Pool, ids: readonly string[]): Promise<StoredNode[]> {
  if (ids.length === 0) return [];
  const { rows } = await pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} FROM nodes n WHERE n.id = ANY($1::text[]) ORDER BY n.id COLLATE "C"`, [ids]);
  return rows.map(toNode);
}
