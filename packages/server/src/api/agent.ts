import express, { type ErrorRequestHandler, type RequestHandler, type Router } from 'express';
import { HeartbeatSchema, JoinRequestSchema, REPORT_LIMITS, nodeAddrRefusal, type NodeReport } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { ownNode, requireJoinToken, requireNodeCredential } from '../credentials/auth.js';
import type { Membership } from '../credentials/membership.js';
import type { CredentialSightings } from '../credentials/sightings.js';
import { DomainError, badRequest, echo } from '../errors.js';
import type { CredentialEvent } from '../events/index.js';
import { filesApi } from '../files/files-api.js';
import { jsonBody, methodNotAllowed, parseBody, sendJson } from '../http/http.js';
import { Turns } from '../http/turns.js';
import { perNodeCap } from './node-caps.js';

/**
 * A heartbeat body above this waits for its own turn of the event loop before it is
 * checked (`Turns`); a real node's, a few KiB, is checked at once.
 */
const LARGE_BEAT_BYTES = 64 * 1024;

/** Longest a long-poll is held open; agents ask again at once. */
const MAX_WAIT_MS = 30_000;

/** What the agent API takes from the server's settings. */
/** How many calls of one node the agent API serves at once (see {@link perNodeCap}). */
export interface NodeCaps {
  /** Requests in flight per node, of every kind (`--node-max-requests`). */
  maxRequests: number;
  /** Assignment long-polls in flight per node (`--node-max-long-polls`). */
  maxLongPolls: number;
}

export interface AgentApiOptions {
  caps: NodeCaps;
  /** `--models-dir`: served as `llmgw://` files; absent = none. */
  modelsDir?: string;
  /** `--allow-loopback-nodes`: a loopback `mgmt_addr` is taken (a single-machine fleet). */
  allowLoopbackNodes?: boolean;
  /** Where each credential is heard from (and, with `--bind-credentials`, refused elsewhere). */
  sightings?: CredentialSightings;
  /** How long a node stays suspect after its credential was last heard from two places. */
  suspectForMs?: number;
  /** Records a credential event (`credential-conflict`, `credential-refused`). */
  onCredential?: (e: CredentialEvent) => void;
}

/**
 * What agents call (packages/agent/README.md; credentials/README.md). The join token is good for `/join` only, which
 * trades it for the node's credential; every other call carries that credential and
 * may speak for its own node only (403 otherwise). A heartbeat is validated in full
 * before anything in the inventory changes, so a bad report leaves no trace.
 */
export function agentApi(ctl: Controller, membership: Membership, opts: AgentApiOptions): Router {
  const { modelsDir, caps } = opts;
  const r = express.Router();

  r.route('/join')
    .post(requireJoinToken(membership), ...jsonBody('64kb'), async (req, res) => {
      const body = parseBody(JoinRequestSchema, req.body);
      res.json(await membership.join(body.node_id, body.join_id));
    })
    .all(methodNotAllowed);

  r.use(requireNodeCredential(membership));
  r.use(perNodeCap(caps.maxRequests, 'requests', '--node-max-requests'));

  // The hot route (every node, every few seconds): matched before the file routes, and
  // answered without what `res.json` adds for a GET (an ETag, a hash of the body).
  // Bounded in bytes twice (REPORT_LIMITS): the body as it comes, and the report in it,
  // which the server keeps, stores and lists; either refusal is a 413 and an event.
  const turns = new Turns();
  r.route('/heartbeat')
    .post(
      ...jsonBody(`${REPORT_LIMITS.heartbeatBytes}b`),
      (async (req, res) => {
        if (Number(req.headers['content-length'] ?? LARGE_BEAT_BYTES) >= LARGE_BEAT_BYTES) await turns.wait();
        const hb = parseBody(HeartbeatSchema, req.body);
        ownNode(res, hb.report.node_id, 'report.node_id');
        // Where the gateway will send prompts: refused before anything is recorded.
        const refused = nodeAddrRefusal(hb.report.mgmt_addr, opts.allowLoopbackNodes === true);
        if (refused) throw badRequest(`report.mgmt_addr ${echo(hb.report.mgmt_addr)} ${refused}`, 'report.mgmt_addr');
        // In UTF-8 bytes; counted only when it could matter (a character is at most 3 bytes per UTF-16 unit).
        const json = JSON.stringify(hb.report);
        const bytes = json.length * 3 <= REPORT_LIMITS.reportBytes ? json.length : Buffer.byteLength(json);
        if (bytes > REPORT_LIMITS.reportBytes) {
          ctl.refuseReport(hb.report.node_id, 'report', bytes, REPORT_LIMITS.reportBytes);
          throw new DomainError(
            'too_large',
            `this node's report is ${bytes} bytes as JSON, over the server's cap of ${REPORT_LIMITS.reportBytes} (fewer labels, files or GPU problems); its last report within the cap stays in force`,
            { field: 'report' },
          );
        }
        watchCredential(ctl, opts, hb.report, req.socket.remoteAddress ?? '');
        sendJson(res, ctl.heartbeat(hb));
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
    .get(perNodeCap(caps.maxLongPolls, 'assignment long-polls', '--node-max-long-polls'), async (req, res) => {
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

/**
 * Checks where this heartbeat's credential is heard from (credentials/sightings.ts): a
 * conflict marks the node suspect and is recorded once per suspect stretch; a refusal
 * (`--bind-credentials`) throws before the report is taken.
 */
function watchCredential(ctl: Controller, opts: AgentApiOptions, report: NodeReport, peer: string): void {
  if (!opts.sightings) return;
  const nowMs = ctl.now();
  const nodeId = report.node_id;
  const verdict = opts.sightings.seen(nodeId, { peer, mgmtAddr: report.mgmt_addr, hostname: report.hostname }, nowMs);
  if (verdict.kind === 'ok') return;
  const node = ctl.inventory.get(nodeId);
  const announce = node === undefined || ctl.inventory.suspectOf(node, nowMs) === undefined;
  const why =
    verdict.kind === 'conflict'
      ? verdict.conflict.reason
      : `node credential of ${nodeId} heard from ${peer} (mgmt_addr ${report.mgmt_addr}, hostname ${report.hostname}) while in use from another place; refused (--bind-credentials)`;
  ctl.inventory.markSuspect(nodeId, why, nowMs + (opts.suspectForMs ?? 300_000));
  if (announce) opts.onCredential?.({ reason: verdict.kind === 'conflict' ? 'credential-conflict' : 'credential-refused', nodeId, message: why });
  if (verdict.kind === 'refused') throw new DomainError('forbidden', verdict.message, { field: 'authorization' });
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
