import express, { type Router } from 'express';
import { methodNotAllowed } from '../http/http.js';
import { badRequest } from '../errors.js';
import type { EventLog, EventQuery } from './event-log.js';

/** Longest a watch's long-poll is held open; `ctl events -w` asks again at once. */
export const MAX_EVENT_WAIT_S = 60;
const MAX_LIMIT = 10_000;

/** A whole number query parameter in [min, max], or undefined when absent. */
function intParam(v: unknown, name: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw badRequest(`${name} must be a whole number from ${min} to ${max}`, name);
  return n;
}

function textParam(v: unknown, name: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !v.trim() || v.length > 256) throw badRequest(`${name} must be one non-empty value`, name);
  return v.trim();
}

/**
 * `GET /api/v1/events?node=N&model=M&since=CURSOR&limit=N&wait_s=S` (`ctl events`):
 * the events kept, oldest first. With `since` (the `cursor` of an earlier answer) only
 * newer ones, the oldest `limit` of them (the cursor goes on from the last); with `wait_s` too, a long-poll that answers as soon as one matches (a
 * watch). `model` takes a name or an alias of the catalog, or the name of a model no
 * longer in it.
 */
export function eventsApi(events: EventLog, resolveModel: (nameOrAlias: string) => string | undefined): Router {
  const r = express.Router();
  r.route('/events')
    .get(async (req, res) => {
      const node = textParam(req.query.node, 'node');
      const model = textParam(req.query.model, 'model');
      const since = intParam(req.query.since, 'since', 0, Number.MAX_SAFE_INTEGER);
      const limit = intParam(req.query.limit, 'limit', 1, MAX_LIMIT);
      const waitS = intParam(req.query.wait_s, 'wait_s', 0, MAX_EVENT_WAIT_S) ?? 0;
      const q: EventQuery = {
        ...(node !== undefined ? { node } : {}),
        ...(model !== undefined ? { model: resolveModel(model) ?? model } : {}),
        ...(since !== undefined ? { since } : {}),
        ...(limit !== undefined ? { limit } : {}),
      };
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const reply = await events.wait(q, waitS * 1000, abort.signal);
      if (!res.writableEnded && !abort.signal.aborted) res.json(reply);
    })
    .all(methodNotAllowed);
  return r;
}
