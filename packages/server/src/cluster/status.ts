import type pg from 'pg';
import type { StatusView } from '@llmgw/shared';
import { DB_MS, num } from './db-time.js';
import type { InstanceRegistry, InstanceRow } from './instances.js';
import { currentLeader, type LeaderInfo } from './lease.js';

/**
 * `GET /api/v1/status` on PostgreSQL, from the instance rows and the lease, all in DB ms
 * (`dbNowMs` is the database's clock too, so an instance's clock never skews "last seen").
 * An instance is marked leader when it is the lease holder given, not by its row's own
 * flag, so the table and the leader line always agree.
 */
export function clusterStatus(rows: readonly InstanceRow[], leader: LeaderInfo, selfId: string, dbNowMs: number): StatusView {
  const holder = leader.holder;
  return {
    store: 'postgres',
    instance: selfId,
    leader: {
      ...(holder !== undefined ? { instance: holder } : {}),
      epoch: leader.epoch,
      ...(holder !== undefined && leader.sinceMs !== undefined ? { since: new Date(leader.sinceMs).toISOString() } : {}),
    },
    instances: rows.map((r) => ({
      id: r.id,
      ...(r.adminUrl !== undefined ? { admin_url: r.adminUrl } : {}),
      ...(r.clientUrl !== undefined ? { client_url: r.clientUrl } : {}),
      started: new Date(r.startedMs).toISOString(),
      // A row written after `dbNowMs` was read is "just now", not negative.
      last_seen_s: Math.max(0, Math.floor((dbNowMs - r.seenMs) / 1000)),
      leader: holder !== undefined && r.id === holder,
      self: r.id === selfId,
      ...(r.info.version !== undefined ? { version: r.info.version } : {}),
      ...(r.info.catalog !== undefined ? { catalog: r.info.catalog } : {}),
    })),
  };
}

/** Reads the instances, the lease and the database's clock, and builds the view: what `statusApi` wants on PostgreSQL. */
export async function readClusterStatus(registry: Pick<InstanceRegistry, 'id' | 'list'>, pool: pg.Pool): Promise<StatusView> {
  const [rows, leader, now] = await Promise.all([registry.list(), currentLeader(pool), pool.query<{ now_ms: string }>(`SELECT ${DB_MS} AS now_ms`)]);
  return clusterStatus(rows, leader, registry.id, num(now.rows[0]?.now_ms));
}
