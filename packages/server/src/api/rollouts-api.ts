import express, { type Router } from 'express';
import { ROLLOUT_DEFAULTS, type Model, type RolloutView } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import type { RolloutRecord } from '../domain.js';
import { rolloutStatus } from '../reconcile/rollout.js';
import { methodNotAllowed } from '../http/http.js';
import { resolveModel } from './models.js';
import { adminRoute } from './routes.js';
import { ADMIN_EVENTS } from '../events/admin-events.js';

/**
 * `GET /api/v1/models/{name}/rollout` (`ctl rollout status|history`) and its `pause` and
 * `resume`. Where a rollout stands is derived from the replicas here, on any instance; the
 * record (history, halt, pause) comes from the store the leader writes.
 */
export function rolloutsApi(ctl: Controller): Router {
  const r = express.Router();
  r.route('/models/:name/rollout')
    .get(async (req, res) => {
      const model = modelOf(ctl, String(req.params.name));
      res.json(rolloutView(ctl, model, await ctl.rollouts.read(model.name)));
    })
    .all(methodNotAllowed);

  adminRoute(r, '/models/:name/rollout/pause', {
    post: {
      audit: ADMIN_EVENTS.rolloutPause,
      handle: async (req, res) => {
        const model = modelOf(ctl, String(req.params.name));
        const next = await ctl.rollouts.control(model.name, (stored) => ({ paused: true, ...(stored?.resumed ? { resumed: stored.resumed } : {}) }));
        ctl.notify();
        res.json(rolloutView(ctl, model, next));
      },
    },
  });

  adminRoute(r, '/models/:name/rollout/resume', {
    post: {
      audit: ADMIN_EVENTS.rolloutResume,
      handle: async (req, res) => {
        const model = modelOf(ctl, String(req.params.name));
        const revision = ctl.rollouts.revisions(ctl.models).get(model.name)!;
        const next = await ctl.rollouts.control(model.name, () => ({ resumed: { revision, atMs: ctl.now() } }));
        ctl.notify();
        res.json(rolloutView(ctl, model, next));
      },
    },
  });
  return r;
}

function modelOf(ctl: Controller, nameOrAlias: string): Model {
  const name = resolveModel(ctl, nameOrAlias);
  return ctl.models.find((m) => m.name === name)!;
}

/** A model's rollout as the API shows it: the replicas' revisions against the catalog's, and the record. */
export function rolloutView(ctl: Controller, model: Model, record: RolloutRecord | undefined): RolloutView {
  const revision = ctl.rollouts.revisions(ctl.models).get(model.name)!;
  // Only the planning instance knows why a rollout waits (its last placement attempt).
  const passed = ctl.rollouts.status(model.name);
  const blocked = passed?.revision === revision && passed.state === 'waiting' ? passed.reason : undefined;
  const s = rolloutStatus(model, revision, ctl.listReplicas(), record, blocked);
  const settings = { ...ROLLOUT_DEFAULTS, ...model.rollout };
  return {
    model: model.name,
    revision,
    state: s.state,
    ...(s.reason ? { reason: s.reason } : {}),
    ...(s.state === 'halted' && record?.halted ? { halted_at: new Date(record.halted.atMs).toISOString() } : {}),
    replicas: s.replicas,
    updated: s.updated,
    ready: s.ready,
    outdated: s.outdated,
    max_surge: settings.max_surge,
    max_unavailable: settings.max_unavailable,
    progress_deadline_s: settings.progress_deadline_s,
    ...(settings.pause_after !== undefined ? { pause_after: settings.pause_after } : {}),
    paused: record?.paused === true,
    history: (record?.history ?? []).map((e) => ({
      revision: e.revision,
      since: new Date(e.sinceMs).toISOString(),
      change: e.change,
      current: e.revision === revision,
    })),
  };
}
