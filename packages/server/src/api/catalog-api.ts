import express, { type Router } from 'express';
import type { Controller } from '../controller/controller.js';
import { methodNotAllowed } from '../http/http.js';
import type { CatalogStatusSource } from '../catalog/watch.js';
import { catalogStatusView } from './views.js';

/**
 * `GET /api/v1/catalog`: the catalog file in force and its latest failed reload, which
 * `ctl models` prints above the table. Its own router, beside `adminApi`, because its
 * source is the catalog watcher rather than the controller.
 */
export function catalogApi(ctl: Controller, source: CatalogStatusSource | undefined): Router {
  const r = express.Router();
  r.route('/catalog')
    .get((_req, res) => {
      res.json(catalogStatusView(source, ctl.now()));
    })
    .all(methodNotAllowed);
  return r;
}
