import express, { type Router } from 'express';
import { KeyCreateRequestSchema, NodeStateAliases, NodeStateRequestSchema } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { DomainError, badRequest, notFound } from '../errors.js';
import { jsonBody, parseBody } from './http.js';
import type { KeyRing } from '../gateway/keys.js';
import { explainView, modelViews, nodeViews, replicaViews } from './views.js';

/**
 * The management surface `ctl` and the dashboard use, mounted on the admin listener
 * behind the admin token. Handlers are thin: validate, call the controller, render.
 */
export function adminApi(ctl: Controller, keys: KeyRing): Router {
  const r = express.Router();

  r.get('/nodes', (_req, res) => {
    res.json(nodeViews(ctl));
  });

  r.get('/models', (_req, res) => {
    res.json(modelViews(ctl));
  });

  r.get('/replicas', (req, res) => {
    const q = typeof req.query.model === 'string' ? req.query.model : undefined;
    const model = q ? resolveModel(ctl, q) : undefined;
    res.json(replicaViews(ctl, model, req.query.show_keys === 'true'));
  });

  r.get('/replicas/:id/logs', (req, res) => {
    const id = String(req.params.id);
    const replica = ctl.listReplicas().find((x) => x.id === id);
    if (!replica) throw notFound(`no replica "${id}" (see ctl replicas)`);
    // Express 5's 'simple' query parser (node:querystring) gives a string, an array of
    // strings for a repeated parameter, or nothing: never the nested objects ParsedQs allows.
    const given = req.query.rank as string | string[] | undefined;
    const rank = given === undefined ? 0 : Number(given);
    const shard = replica.shards.find((s) => s.rank === rank);
    if (!shard) throw badRequest(`replica ${id} has no shard of rank ${String(given)} (ranks 0-${replica.shards.length - 1})`, 'rank');
    res.json({ replica: id, shard: shard.id, node: shard.nodeId, rank, log: ctl.logTail(shard.id) ?? '' });
  });

  r.get('/explain-placement', (req, res) => {
    const q = typeof req.query.model === 'string' ? req.query.model.trim() : '';
    if (!q) throw badRequest('model is required (?model=NAME)', 'model');
    res.json(explainView(ctl, resolveModel(ctl, q)));
  });

  // One endpoint rather than three verbs: cordon, drain and uncordon are the same
  // operation with different targets.
  r.post('/nodes/:id/state', jsonBody('64kb'), (req, res) => {
    const body = parseBody(NodeStateRequestSchema, req.body);
    const state = NodeStateAliases[body.state];
    if (!state) {
      throw badRequest(
        `unknown state "${body.state}" (want ready, cordoned or draining; or uncordon, cordon, drain)`,
        'state',
      );
    }
    const id = String(req.params.id);
    const reason = body.reason?.trim() || undefined;
    if ((body.deadline_s !== undefined || body.force) && state !== 'draining') {
      throw badRequest('deadline_s and force apply only to drain', body.force ? 'force' : 'deadline_s');
    }
    const drain = { ...(body.deadline_s !== undefined ? { deadlineS: body.deadline_s } : {}), ...(body.force ? { force: true } : {}) };
    if (!ctl.setNodeState(id, state, reason, drain)) throw notFound(`no node "${id}"`);
    res.json({ id, state, ...(reason ? { reason } : {}) });
  });

  r.get('/keys', (_req, res) => {
    res.json(keys.list());
  });

  r.post('/keys', jsonBody('64kb'), (req, res) => {
    const body = parseBody(KeyCreateRequestSchema, req.body);
    res.status(201).json(keys.create(body, (m) => ctl.catalogView.resolve(m)?.name));
  });

  r.delete('/keys/:id', (req, res) => {
    res.json(keys.revoke(String(req.params.id)));
  });

  r.get('/usage', (_req, res) => {
    res.json(keys.usageRows());
  });

  return r;
}

function resolveModel(ctl: Controller, nameOrAlias: string): string {
  const m = ctl.catalogView.resolve(nameOrAlias);
  if (m) return m.name;
  const close = ctl.catalogView.suggest(nameOrAlias);
  throw new DomainError(
    'model_not_found',
    `model "${nameOrAlias}" is not in the catalog${close.length ? ` (did you mean ${close.join(', ')}?)` : ''}`,
  );
}
