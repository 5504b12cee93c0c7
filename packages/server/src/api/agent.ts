import express, { type Router } from 'express';
import { HeartbeatSchema, JoinRequestSchema } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { ownNode, requireJoinToken, requireNodeCredential } from '../credentials/auth.js';
import type { Membership } from '../credentials/membership.js';
import { badRequest } from '../errors.js';
import { filesApi } from '../files/files-api.js';
import { jsonBody, methodNotAllowed, parseBody, sendJson } from '../http/http.js';

/** Longest a long-poll is held open; agents ask again at once. */
const MAX_WAIT_MS = 30_000;

/**
 * What agents call (packages/agent/README.md; credentials/README.md). The join token is good for `/join` only, which
 * trades it for the node's credential; every other call carries that credential and
 * may speak for its own node only (403 otherwise). A heartbeat is validated in full
 * before anything in the inventory changes, so a bad report leaves no trace.
 */
export function agentApi(ctl: Controller, membership: Membership, modelsDir?: string): Router {
  const r = express.Router();

  r.route('/join')
    .post(requireJoinToken(membership), ...jsonBody('64kb'), async (req, res) => {
      const body = parseBody(JoinRequestSchema, req.body);
      res.json(await membership.join(body.node_id, body.join_id));
    })
    .all(methodNotAllowed);

  r.use(requireNodeCredential(membership));

  // The hot route (every node, every few seconds): matched before the file routes, and
  // answered without what `res.json` adds for a GET (an ETag, a hash of the body).
  r.route('/heartbeat')
    .post(...jsonBody('4mb'), (req, res) => {
      const hb = parseBody(HeartbeatSchema, req.body);
      ownNode(res, hb.report.node_id, 'report.node_id');
      sendJson(res, ctl.heartbeat(hb));
    })
    .all(methodNotAllowed);

  // Model files of `llmgw://` sources, for any node with a credential (files/README.md).
  r.use(filesApi(modelsDir));

  // Long-poll, the one channel for assignments: answers as soon as the node's assignments
  // change, so a placement reaches the agent in milliseconds rather than at its next beat.
  // Exempt from the listener's request timeout by its nature: that timeout covers
  // receiving the request, and a GET is received at once; the wait is the response.
  r.route('/nodes/:id/assignments')
    .get(async (req, res) => {
      const id = String(req.params.id);
      ownNode(res, id, 'path');
      const after = Number(req.query.after ?? -1);
      const wait = Math.min(Number(req.query.wait_ms ?? 25_000), MAX_WAIT_MS);
      if (!Number.isFinite(after)) throw badRequest('after must be a number', 'after');
      if (!Number.isFinite(wait) || wait < 0) throw badRequest('wait_ms must be a number >= 0', 'wait_ms');
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const reply = await ctl.waitForAssignments(id, after, wait, abort.signal);
      if (!res.writableEnded && !abort.signal.aborted) res.json(reply);
    })
    .all(methodNotAllowed);

  return r;
}
