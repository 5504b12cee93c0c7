import type pg from 'pg';
import { EventViewSchema, validate } from '@llmgw/shared';
import type { EventRetention, StoredEvent } from './store.js';

// PostgresStore's events (`events`), apart from the rest of its statements.

/**
 * The advisory lock `addEvents` holds: ids come from a sequence, and without it a
 * transaction that took a smaller id could commit after one that took a larger, so a
 * watcher reading "after id N" would skip it for good.
 */
export const EVENTS_LOCK = 0x6c6c6576;

/**
 * Appends under `EVENTS_LOCK` (ids commit in the order they are taken), each event
 * with a new id from the sequence in the order given, and prunes: older than
 * `keep.sinceMs`, and all but the newest `keep.maxRows`. The id is not kept inside the
 * stored JSON: the row's id is the event's.
 */
export async function addEventRows(c: pg.ClientBase, events: readonly StoredEvent[], keep: EventRetention): Promise<number[]> {
  await c.query('SELECT pg_advisory_xact_lock($1)', [EVENTS_LOCK]);
  let ids: number[] = [];
  if (events.length) {
    const { rows } = await c.query<{ id: string }>(
      `INSERT INTO events (time_ms, data) SELECT u.time_ms, u.data
       FROM unnest($1::bigint[], $2::jsonb[]) WITH ORDINALITY AS u(time_ms, data, ord) ORDER BY u.ord RETURNING id`,
      [events.map((e) => Date.parse(e.time)), events.map(({ id: _given, ...data }) => JSON.stringify(data))],
    );
    // The sequence is drawn in insertion order, which is the order given.
    ids = rows.map((r) => Number(r.id)).sort((a, b) => a - b);
  }
  await c.query(
    `DELETE FROM events WHERE time_ms < $1 OR $2::int <= 0
       OR id < (SELECT id FROM events ORDER BY id DESC OFFSET GREATEST($2::int - 1, 0) LIMIT 1)`,
    [keep.sinceMs, keep.maxRows],
  );
  return ids;
}

/** The newest `limit` events after `afterId`, oldest first. */
export async function loadEventRows(pool: pg.Pool, limit: number, afterId?: number): Promise<StoredEvent[]> {
  const { rows } = await pool.query<{ id: string; data: unknown }>(
    'SELECT id, data FROM (SELECT id, data FROM events WHERE id > $2 ORDER BY id DESC LIMIT $1) e ORDER BY id',
    [limit, afterId ?? -1],
  );
  // A row that is not an event (hand-edited) is skipped, not thrown, as in SqliteStore.
  return rows.flatMap((r) => {
    if (typeof r.data !== 'object' || r.data === null || Array.isArray(r.data)) return [];
    const e = { ...(r.data as Record<string, unknown>), id: Number(r.id) };
    return validate(EventViewSchema, e).ok ? [e as StoredEvent] : [];
  });
}
