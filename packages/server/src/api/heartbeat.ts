import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { HeartbeatSchema, REPORT_LIMITS, nodeAddrRefusal, type HeartbeatReply, type NodeReport } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { ownNodeOf } from '../credentials/auth.js';
import type { Membership } from '../credentials/membership.js';
import type { CredentialSightings } from '../credentials/sightings.js';
import { DomainError, badRequest, echo } from '../errors.js';
import type { CredentialEvent } from '../events/index.js';
import { parseBody, sendJson, tooDeep, writeError } from '../http/http.js';
import { bearerToken } from '../http/principal.js';
import { Turns } from '../http/turns.js';
import type { NodeCap } from './node-caps.js';

/**
 * A heartbeat body above this waits for its own turn of the event loop before it is
 * checked (`Turns`); a real node's, a few KiB, is checked at once.
 */
const LARGE_BEAT_BYTES = 64 * 1024;

/** What taking a heartbeat needs besides the heartbeat. */
export interface HeartbeatDeps {
  ctl: Controller;
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
 * Takes one heartbeat of node `own` (the credential's), whose body is parsed JSON of
 * `declaredBytes` (Content-Length; unknown counts as large). Validated in full before
 * anything in the inventory changes, so a bad report leaves no trace. Bounded in bytes
 * twice (REPORT_LIMITS): the body as it came (its reader's limit), and the report in it,
 * which the server keeps, stores and lists; either refusal is a 413 and an event. The one
 * place a heartbeat is taken, for both of its paths (`leanHeartbeat`, api/agent.ts).
 */
export async function acceptHeartbeat(
  deps: HeartbeatDeps,
  turns: Turns,
  body: unknown,
  own: string,
  peer: string,
  declaredBytes: number,
): Promise<HeartbeatReply> {
  if (!(declaredBytes < LARGE_BEAT_BYTES)) await turns.wait();
  const { ctl } = deps;
  const hb = parseBody(HeartbeatSchema, body);
  ownNodeOf(own, hb.report.node_id, 'report.node_id');
  // Where the gateway will send prompts: refused before anything is recorded.
  const refused = nodeAddrRefusal(hb.report.mgmt_addr, deps.allowLoopbackNodes === true);
  if (refused) throw badRequest(`report.mgmt_addr ${echo(hb.report.mgmt_addr)} ${refused}`, 'report.mgmt_addr');
  if (declaredBytes * MAX_GROWTH > REPORT_LIMITS.reportBytes) refuseLargeReport(ctl, hb.report);
  watchCredential(deps, hb.report, peer);
  return ctl.heartbeat(hb);
}

/**
 * How many times its bytes in the body a report can take as the server writes it
 * (JSON.stringify): strings and keys never grow (an escape stays an escape or shrinks),
 * white space goes, and the most a token grows is a number spelled out (`9e20`, 4 bytes,
 * is 21). A body this many times under the cap cannot hold a report over it, so a
 * node's usual few KiB are not serialized again just to be counted.
 */
const MAX_GROWTH = 6;

/** Throws `too_large` (and records the refusal) when the report as JSON is over `REPORT_LIMITS.reportBytes`. */
function refuseLargeReport(ctl: Controller, report: NodeReport): void {
  // In UTF-8 bytes; counted only when it could matter (a character is at most 3 bytes per UTF-16 unit).
  const json = JSON.stringify(report);
  const bytes = json.length * 3 <= REPORT_LIMITS.reportBytes ? json.length : Buffer.byteLength(json);
  if (bytes > REPORT_LIMITS.reportBytes) {
    ctl.refuseReport(report.node_id, 'report', bytes, REPORT_LIMITS.reportBytes);
    throw new DomainError(
      'too_large',
      `this node's report is ${bytes} bytes as JSON, over the server's cap of ${REPORT_LIMITS.reportBytes} (fewer labels, files or GPU problems); its last report within the cap stays in force`,
      { field: 'report' },
    );
  }
}

/**
 * The bytes of a body as it will be read: its Content-Length when it comes as sent
 * (no or `identity` encoding), else Infinity. A compressed body's Content-Length says
 * nothing of the body (`acceptHeartbeat`'s turn and report count go by this).
 */
export function plainBodyBytes(h: IncomingHttpHeaders): number {
  const encoding = h['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return Infinity;
  const length = Number(h['content-length'] ?? Infinity);
  return Number.isFinite(length) ? length : Infinity;
}

/** The heartbeat's path; the lean one takes it only exactly so (no query). */
const HEARTBEAT_PATH = '/agent/v1/heartbeat';

/** A Content-Type the lean path reads as body-parser would: JSON, UTF-8 (body-parser takes any `utf-` charset; the rest go the long way). */
const PLAIN_JSON = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/**
 * The admin listener's hot request (every node, every few seconds) without express: the
 * router, body-parser's stream and async-hook machinery and express's decorated req/res
 * cost more than the heartbeat itself (bench/README.md, idle cost and cluster figures).
 * Returns false, having touched nothing, for any request it does not take, which express
 * then serves as before: another path, no or an unknown credential, a body over the
 * limit, without Content-Length, compressed or in another charset. Those answers (the
 * 401s, the 413 and its event, the 415s) exist once, on the express route; this path
 * takes only the plain case and answers as that route does: the same per-node cap, depth
 * limit, checks (`acceptHeartbeat`) and error body (`writeError`).
 */
export function leanHeartbeat(deps: HeartbeatDeps, membership: Membership, cap: NodeCap, turns: Turns): (req: IncomingMessage, res: ServerResponse) => boolean {
  const limit = REPORT_LIMITS.heartbeatBytes;
  return (req, res) => {
    if (req.method !== 'POST' || req.url !== HEARTBEAT_PATH) return false;
    const h = req.headers;
    const length = plainBodyBytes(h);
    if (!(length <= limit) || h['transfer-encoding'] !== undefined) return false;
    if (h['content-type'] !== undefined && !PLAIN_JSON.test(h['content-type'])) return false;
    const token = bearerToken(h.authorization);
    const own = token === undefined ? undefined : membership.credentials.nodeOf(token);
    if (own === undefined) return false;
    const full = cap.enter(own, res);
    if (full) {
      writeError(res, full);
      return true;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => void chunks.push(c));
    // A client gone mid-body: nothing to answer, and its count ends with the response.
    req.on('error', () => void res.destroy());
    req.once('end', () => {
      let body: unknown;
      try {
        body = parseJson(chunks.length === 1 ? chunks[0]!.toString() : Buffer.concat(chunks).toString());
      } catch (err) {
        return writeError(res, err);
      }
      const deep = tooDeep(body);
      if (deep) return writeError(res, deep);
      acceptHeartbeat(deps, turns, body, own, req.socket.remoteAddress ?? '', length).then(
        (reply) => sendJson(res, reply),
        (err: unknown) => writeError(res, err),
      );
    });
    return true;
  };
}

/**
 * A body as body-parser's strict JSON parser reads it: a BOM dropped (its UTF-8 decoder
 * drops one), empty as `{}`, anything but an object or array refused; a failure carries
 * body-parser's words and error type, so `toDomainError` words it alike.
 */
function parseJson(text: string): unknown {
  const s = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (s.length === 0) return {};
  // JSON whitespace (RFC 8259): space, tab, line feed, carriage return.
  const first = /^[ \t\n\r]*([\s\S]?)/.exec(s)![1]!;
  if (first !== '{' && first !== '[') throw parseFailed(strictViolation(s, first));
  try {
    return JSON.parse(s);
  } catch (err) {
    throw parseFailed((err as Error).message);
  }
}

const parseFailed = (message: string) => Object.assign(new SyntaxError(message), { type: 'entity.parse.failed' });

/** body-parser's words for a body that is no object or array: what JSON.parse says of it with everything from `first` on masked. */
function strictViolation(s: string, first: string): string {
  // Only white space: nothing is masked, and JSON.parse finds the input ended.
  const at = first === '' ? -1 : s.indexOf(first);
  try {
    JSON.parse(at === -1 ? '' : s.slice(0, at) + '#'.repeat(s.length - at));
  } catch (err) {
    return (err as Error).message.replace(/#+/g, (mask) => s.slice(at, at + mask.length));
  }
  return 'strict violation';
}

/**
 * Checks where this heartbeat's credential is heard from (credentials/sightings.ts): a
 * conflict marks the node suspect and is recorded once per suspect stretch; a refusal
 * (`--bind-credentials`) throws before the report is taken.
 */
function watchCredential(deps: HeartbeatDeps, report: NodeReport, peer: string): void {
  const { ctl, sightings } = deps;
  if (!sightings) return;
  const nowMs = ctl.now();
  const nodeId = report.node_id;
  const verdict = sightings.seen(nodeId, { peer, mgmtAddr: report.mgmt_addr, hostname: report.hostname }, nowMs);
  if (verdict.kind === 'ok') return;
  const node = ctl.inventory.get(nodeId);
  const announce = node === undefined || ctl.inventory.suspectOf(node, nowMs) === undefined;
  const why =
    verdict.kind === 'conflict'
      ? verdict.conflict.reason
      : `node credential of ${nodeId} heard from ${peer} (mgmt_addr ${report.mgmt_addr}, hostname ${report.hostname}) while in use from another place; refused (--bind-credentials)`;
  ctl.inventory.markSuspect(nodeId, why, nowMs + (deps.suspectForMs ?? 300_000));
  if (announce) deps.onCredential?.({ reason: verdict.kind === 'conflict' ? 'credential-conflict' : 'credential-refused', nodeId, message: why });
  if (verdict.kind === 'refused') throw new DomainError('forbidden', verdict.message, { field: 'authorization' });
}
