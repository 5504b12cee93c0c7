import express, { type Router } from 'express';
import type { StatusView } from '@llmgw/shared';
import { methodNotAllowed } from '../http/http.js';

/** What answers `GET /api/v1/status`: `soloStatus` on SQLite, `readClusterStatus` (cluster/status.ts) on PostgreSQL. */
export interface StatusSource {
  status(): Promise<StatusView>;
}

/**
 * `GET /api/v1/status`: the store, the instances and the leader, for `ctl status`. Its
 * own router, like `catalogApi`, because its source is the cluster (or the one SQLite
 * instance), not the controller.
 */
export function statusApi(source: StatusSource): Router {
  const r = express.Router();
  r.route('/status')
    .get(async (_req, res) => {
      res.json(await source.status());
    })
    .all(methodNotAllowed);
  return r;
}

/** The one SQLite instance, as `soloStatus` takes it. */
export interface SoloInstance {
  id: string;
  startedAtMs: number;
  adminUrl?: string;
  clientUrl?: string;
  version?: string;
  /** The catalog in force and its last reload's failure, when there is a catalog. */
  catalog?: { digest: string; models: number; error?: string };
  nowMs: number;
}

/**
 * The status of a SQLite install: one instance, its own leader since it started, at
 * epoch 0 (there is no lease to take), seen now because it is the one answering.
 */
export function soloStatus(s: SoloInstance): StatusView {
  const started = new Date(s.startedAtMs).toISOString();
  return {
    store: 'sqlite',
    instance: s.id,
    leader: { instance: s.id, epoch: 0, since: started },
    instances: [
      {
        id: s.id,
        ...(s.adminUrl !== undefined ? { admin_url: s.adminUrl } : {}),
        ...(s.clientUrl !== undefined ? { client_url: s.clientUrl } : {}),
        started,
        last_seen_s: 0,
        leader: true,
        self: true,
        ...(s.version !== undefined ? { version: s.version } : {}),
        ...(s.catalog !== undefined ? { catalog: s.catalog } : {}),
      },
    ],
  };
}
