import express, { type Router } from 'express';
import { KeyCreateRequestSchema, KeyUpdateRequestSchema, NodeStateAliases, NodeStateRequestSchema, type NodeStateReply, type VersionView } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { badRequest, echo, notFound } from '../errors.js';
import { forbidden } from './access.js';
import { principalOf } from '../http/principal.js';
import { jsonBody, methodNotAllowed, parseBody } from '../http/http.js';
import { resolveModel } from './models.js';
import type { KeyRing } from '../gateway/keys.js';
import { explainView, modelViews, replicaViews, type LoadedAdapters } from './views.js';
import { NEXT_CURSOR_HEADER, nodePage, pageQuery } from './node-pages.js';
import { adminRoute } from './routes.js';
import { ADMIN_EVENTS } from '../events/admin-events.js';
import { SERVER_VERSION } from '../version.js';
import { USAGE_MINUTES_KEEP_MS } from '../store/store.js';

/** How far back `?since=` may reach: as long as usage per minute is kept. */
const SINCE_DAYS = USAGE_MINUTES_KEEP_MS / 86_400_000;

/**
 * `GET /usage?since=`: a duration back from now (`90s`, `30m`, `1h`, `7d`) or an ISO 8601
 * time, within the last `SINCE_DAYS` days and not in the future; epoch ms.
 */
export function parseSince(given: string | string[], now: number): number {
  const text = (Array.isArray(given) ? given[0] : given)?.trim() ?? '';
  const m = /^(\d+)([smhd])$/.exec(text);
  const t = m
    ? now - Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'] * 1000
    : /^\d{4}-\d\d-\d\d/.test(text)
      ? Date.parse(text)
      : NaN;
  if (Number.isNaN(t)) throw badRequest(`since "${echo(text)}" is not a duration or a time (want e.g. 30m, 1h, 7d, or 2026-12-01T00:00:00Z)`, 'since');
  if (t > now) throw badRequest(`since ${echo(text)} is in the future`, 'since');
  if (t < now - USAGE_MINUTES_KEEP_MS)
    throw badRequest(
      `since ${echo(text)} is more than ${SINCE_DAYS} days ago: usage per minute is kept ${SINCE_DAYS} days (without since: the totals)`,
      'since',
    );
  return t;
}

/**
 * The management surface `ctl` and the dashboard use, mounted on the admin listener
 * behind the admin token. Handlers are thin: validate, call the controller, render.
 */
export function adminApi(ctl: Controller, keys: KeyRing, loaded?: LoadedAdapters): Router {
  const r = express.Router();

  // Each path is one route ending in `methodNotAllowed`, so any other method is a 405
  // with `Allow` rather than a 404; a path with a write is an `adminRoute`, which adds
  // it and the write's event.
  r.route('/version')
    .get((_req, res) => {
      const v: VersionView = { version: SERVER_VERSION, node: process.version };
      res.json(v);
    })
    .all(methodNotAllowed);

  // Paged (`?after=CURSOR&limit=N`, the next cursor in `X-Next-Cursor`): one answer is
  // bounded in nodes and bytes and built without stalling the listeners (issue 27).
  r.route('/nodes')
    .get(async (req, res) => {
      const q = pageQuery(req.query);
      const page = await nodePage(ctl, q.after, q.limit);
      if (page.next) res.setHeader(NEXT_CURSOR_HEADER, page.next);
      res.type('application/json').send(`[${page.json.join(',')}]`);
    })
    .all(methodNotAllowed);

  r.route('/models')
    .get((_req, res) => {
      // Without a token check in front (tests mounting the router alone), as the admin.
      const who = principalOf(res);
      res.json(modelViews(ctl, !who || who.role === 'admin', loaded));
    })
    .all(methodNotAllowed);

  r.route('/replicas')
    .get((req, res) => {
      const q = typeof req.query.model === 'string' ? req.query.model : undefined;
      const model = q ? resolveModel(ctl, q) : undefined;
      const showKeys = req.query.show_keys === 'true';
      // An engine key calls the engine past every client key and limit: it is not a read.
      const who = principalOf(res);
      if (showKeys && who && who.role !== 'admin') throw forbidden(who, 'show_keys (engine keys)');
      res.json(replicaViews(ctl, model, showKeys, loaded));
    })
    .all(methodNotAllowed);

  r.route('/replicas/:id/logs')
    .get((req, res) => {
      const id = String(req.params.id);
      const replica = ctl.listReplicas().find((x) => x.id === id);
      if (!replica) throw notFound(`no replica "${echo(id)}" (see ctl replicas)`);
      // Express 5's 'simple' query parser (node:querystring) gives a string, an array of
      // strings for a repeated parameter, or nothing: never the nested objects ParsedQs allows.
      const given = req.query.rank as string | string[] | undefined;
      const rank = given === undefined ? 0 : Number(given);
      const shard = replica.shards.find((s) => s.rank === rank);
      if (!shard) throw badRequest(`replica ${id} has no shard of rank ${echo(String(given))} (ranks 0-${replica.shards.length - 1})`, 'rank');
      res.json({ replica: id, shard: shard.id, node: shard.nodeId, rank, log: ctl.logTail(shard.id) ?? '' });
    })
    .all(methodNotAllowed);

  r.route('/explain-placement')
    .get((req, res) => {
      const q = typeof req.query.model === 'string' ? req.query.model.trim() : '';
      if (!q) throw badRequest('model is required (?model=NAME)', 'model');
      // A LoRA adapter is explained with its base: why the base is (not) placed, and why the adapter cannot be served.
      const adapted = ctl.catalogView.resolve(q) ? undefined : ctl.catalogView.adapter?.(q);
      res.json(adapted ? explainView(ctl, adapted.model.name, adapted.adapter.name) : explainView(ctl, resolveModel(ctl, q)));
    })
    .all(methodNotAllowed);

  // One endpoint rather than three verbs: cordon, drain and uncordon are the same
  // operation with different targets.
  adminRoute(r, '/nodes/:id/state', {
    post: {
      audit: ADMIN_EVENTS.nodeState,
      handle: [
        ...jsonBody('64kb'),
        async (req, res) => {
          const body = parseBody(NodeStateRequestSchema, req.body);
          // Own keys only: `constructor` or `__proto__` must not find something inherited.
          const state = Object.hasOwn(NodeStateAliases, body.state) ? NodeStateAliases[body.state] : undefined;
          if (!state) {
            throw badRequest(`unknown state "${echo(body.state)}" (want ready, cordoned or draining; or uncordon, cordon, drain)`, 'state');
          }
          const id = String(req.params.id);
          const reason = body.reason?.trim() || undefined;
          if ((body.deadline_s !== undefined || body.force) && state !== 'draining') {
            throw badRequest('deadline_s and force apply only to drain', body.force ? 'force' : 'deadline_s');
          }
          const drain = { ...(body.deadline_s !== undefined ? { deadlineS: body.deadline_s } : {}), ...(body.force ? { force: true } : {}) };
          const before = ctl.inventory.get(id)?.admin.state;
          if (!(await ctl.setNodeState(id, state, reason, drain))) throw notFound(`no node "${echo(id)}"`);
          // The reason in force, which a repeated cordon without one keeps (Inventory.setAdmin).
          const kept = ctl.inventory.get(id)?.admin.reason;
          const reply: NodeStateReply = { id, state, ...(kept ? { reason: kept } : {}), ...(before === state ? { already: true } : {}) };
          res.json(reply);
        },
      ],
    },
  });

  adminRoute(r, '/keys', {
    get: (_req, res) => {
      res.json(keys.list());
    },
    post: {
      audit: ADMIN_EVENTS.keyCreate,
      handle: [
        ...jsonBody('64kb'),
        async (req, res) => {
          const body = parseBody(KeyCreateRequestSchema, req.body);
          res.status(201).json(await keys.create(body, (m) => keyModel(ctl, m)));
        },
      ],
    },
  });

  adminRoute(r, '/keys/:id', {
    patch: {
      audit: ADMIN_EVENTS.keyUpdate,
      handle: [
        ...jsonBody('64kb'),
        async (req, res) => {
          const body = parseBody(KeyUpdateRequestSchema, req.body);
          res.json(await keys.update(String(req.params.id), body, (m) => keyModel(ctl, m)));
        },
      ],
    },
    delete: {
      audit: ADMIN_EVENTS.keyRevoke,
      handle: async (req, res) => {
        res.json(await keys.revoke(String(req.params.id)));
      },
    },
  });

  r.route('/usage')
    .get(async (req, res) => {
      const since = req.query.since as string | string[] | undefined;
      if (since === undefined) return void res.json(keys.usageRows());
      res.json(await keys.usageSince(parseSince(since, Date.now())));
    })
    .all(methodNotAllowed);

  return r;
}

/** The name a key's `models` entry is stored as: a model's name (for a name or alias), or an adapter's; undefined when neither. */
export function keyModel(ctl: Controller, name: string): string | undefined {
  return ctl.catalogView.resolve(name)?.name ?? ctl.catalogView.adapter?.(name)?.adapter.name;
}
