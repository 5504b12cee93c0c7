import express, { type ErrorRequestHandler, type RequestHandler, type Router } from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JoinRequestSchema, REPORT_LIMITS } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { ownNode, requireJoinToken, requireNodeCredential } from '../credentials/auth.js';
import type { Membership } from '../credentials/membership.js';
import { badRequest } from '../errors.js';
import { filesApi } from '../files/files-api.js';
import { jsonBody, methodNotAllowed, parseBody, sendJson } from '../http/http.js';
import { Turns } from '../http/turns.js';
import { acceptHeartbeat, leanHeartbeat, plainBodyBytes, type HeartbeatDeps } from './heartbeat.js';
import { NodeCap, perNodeCap } from './node-caps.js';

/** Longest a long-poll is held open; agents ask again at once. */
const MAX_WAIT_MS = 30_000;

/** How many calls of one node the agent API serves at once (see {@link NodeCap}). */
export interface NodeCaps {
  /** Requests in flight per node, of every kind (`--node-max-requests`). */
  maxRequests: number;
  /** Assignment long-polls in flight per node (`--node-max-long-polls`). */
  maxLongPolls: number;
}

/** What the agent API takes from the server's settings. */
export interface AgentApiOptions extends Omit<HeartbeatDeps, 'ctl'> {
  caps: NodeCaps;
  /** `--models-dir`: served as `llmgw://` files; absent = none. */
  modelsDir?: string;
}

/** The agent API: its express routes, and the heartbeat's lean path to try first (`leanHeartbeat`). */
export interface AgentApi {
  router: Router;
  /** Serves the request and returns true, or returns false untouched for `router` to serve. */
  lean: (req: IncomingMessage, res: ServerResponse) => boolean;
}

/**
 * What agents call (packages/agent/README.md; credentials/README.md). The join token is good for `/join` only, which
 * trades it for the node's credential; every other call carries that credential and
 * may speak for its own node only (403 otherwise).
 */
export function agentApi(ctl: Controller, membership: Membership, opts: AgentApiOptions): AgentApi {
  const { modelsDir, caps } = opts;
  const deps: HeartbeatDeps = { ...opts, ctl };
  const requests = new NodeCap(caps.maxRequests, 'requests', '--node-max-requests');
  const longPolls = new NodeCap(caps.maxLongPolls, 'assignment long-polls', '--node-max-long-polls');
  const turns = new Turns();
  const r = express.Router();

  r.route('/join')
    .post(requireJoinToken(membership), ...jsonBody('64kb'), async (req, res) => {
      const body = parseBody(JoinRequestSchema, req.body);
      res.json(await membership.join(body.node_id, body.join_id));
    })
    .all(methodNotAllowed);

  r.use(requireNodeCredential(membership));
  r.use(perNodeCap(requests));

  // The hot route (every node, every few seconds), where the lean path left it (its
  // uncommon cases): matched before the file routes. Bounded in bytes by the parser here;
  // a body over it is a 413 and an event (`bodyRefused`).
  r.route('/heartbeat')
    .post(
      ...jsonBody(`${REPORT_LIMITS.heartbeatBytes}b`),
      (async (req, res) => {
        const declared = plainBodyBytes(req.headers);
        sendJson(res, await acceptHeartbeat(deps, turns, req.body, res.locals.nodeId as string, req.socket.remoteAddress ?? '', declared));
      }) satisfies RequestHandler,
      bodyRefused(ctl),
    )
    .all(methodNotAllowed);

  // Model files of `llmgw://` sources, for any node with a credential (files/README.md).
  r.use(filesApi(modelsDir));

  // Long-poll, the one channel for assignments: answers as soon as the node's assignments
  // change, so a placement reaches the agent in milliseconds rather than at its next beat.
  // Exempt from the listener's request timeout by its nature: that timeout covers
  // receiving the request, and a GET is received at once; the wait is the response.
  r.route('/nodes/:id/assignments')
    .get(perNodeCap(longPolls), async (req, res) => {
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

  return { router: r, lean: leanHeartbeat(deps, membership, requests, turns) };
}

/** A heartbeat body over `REPORT_LIMITS.heartbeatBytes` (refused by the body parser): the event, then the usual 413. */
function bodyRefused(ctl: Controller): ErrorRequestHandler {
  return (err: unknown, _req, res, next) => {
    const e = err as { type?: unknown; length?: unknown };
    const nodeId = res.locals.nodeId as string | undefined;
    if (e?.type === 'entity.too.large' && nodeId) {
      ctl.refuseReport(nodeId, 'heartbeat', typeof e.length === 'number' ? e.length : undefined, REPORT_LIMITS.heartbeatBytes);
    }
    next(err);
  };
}
