import type { NodeAdminState } from '@llmgw/shared';
import { NodeStateAliases } from '@llmgw/shared';
import type { RequestHandler } from 'express';
import { principalOf } from '../api/access.js';
import type { AdminState } from '../domain.js';
import type { EventLog, NewEvent } from './event-log.js';

/** What an admin action needs to know after it succeeded. */
interface Done {
  method: string;
  path: string;
  body: Record<string, unknown>;
  query: Record<string, unknown>;
  /** The JSON the handler answered with. */
  reply: Record<string, unknown>;
  /** A node's admin state as it is now. */
  admin(id: string): AdminState | undefined;
}

/** An admin action, described: `what` was done (and `detail`, such as the reason) by whom is added when recorded. */
export type AdminAction = Omit<NewEvent, 'type' | 'source' | 'who' | 'message'> & { what: string; detail?: string };

type Describe = (m: RegExpExecArray, d: Done) => AdminAction;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
const sub = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' ? (v as Record<string, unknown>) : {});
const seg = (m: RegExpExecArray): string => decodeURIComponent(m[1] ?? '');

/** Each admin action the API can take, by method and path: what it is recorded as. */
const ACTIONS: [method: string, path: RegExp, describe: Describe][] = [
  ['POST', /^\/nodes\/([^/]+)\/state$/, (m, d) => {
    const id = seg(m);
    const state = Object.hasOwn(NodeStateAliases, String(d.body.state)) ? NodeStateAliases[String(d.body.state)] : undefined;
    return nodeStateEvent(id, state ?? 'ready', d.admin(id), d.body);
  }],
  ['DELETE', /^\/nodes\/([^/]+)$/, (m, d) => ({ reason: 'node-delete', object: `node/${seg(m)}`, nodes: [seg(m)], what: d.query.force === 'true' ? 'deleted (--force)' : 'deleted' })],
  ['POST', /^\/nodes\/([^/]+)\/approve$/, (m) => ({ reason: 'node-approve', object: `node/${seg(m)}`, nodes: [seg(m)], what: 'approved' })],
  ['POST', /^\/join-token\/rotate$/, () => ({ reason: 'join-token-rotate', object: 'join-token', what: 'rotated', detail: 'the old token no longer joins' })],
  ['POST', /^\/tokens$/, (_m, d) => {
    const t = sub(d.reply.token);
    return { reason: 'token-create', object: `token/${String(t.id)}`, what: 'created', detail: `for "${String(t.name)}", role ${String(t.role)}` };
  }],
  ['DELETE', /^\/tokens\/([^/]+)$/, (m, d) => ({ reason: 'token-revoke', object: `token/${str(d.reply.id) ?? seg(m)}`, what: 'revoked', detail: `"${String(d.reply.name)}"` })],
  ['POST', /^\/keys$/, (_m, d) => {
    const k = sub(d.reply.key);
    return { reason: 'key-create', object: `key/${String(k.id)}`, what: 'created', detail: `for "${String(k.name)}"` };
  }],
  ['POST', /^\/models\/([^/]+)\/rollout\/pause$/, (m) => ({ reason: 'rollout-pause', object: `model/${seg(m)}`, model: seg(m), what: 'rollout paused' })],
  ['POST', /^\/models\/([^/]+)\/rollout\/resume$/, (m, d) => ({ reason: 'rollout-resume', object: `model/${seg(m)}`, model: seg(m), what: 'rollout resumed', detail: `revision ${String(d.reply.revision)}` })],
  ['DELETE', /^\/keys\/([^/]+)$/, (m, d) => ({ reason: 'key-revoke', object: `key/${str(d.reply.id) ?? seg(m)}`, what: 'revoked', detail: `"${String(d.reply.name)}"` })],
];

/** A node's admin state change (API or dashboard) as an event: the state now, with the reason it keeps. */
export function nodeStateEvent(id: string, state: NodeAdminState, now: AdminState | undefined, body: Record<string, unknown> = {}): AdminAction {
  const reason = now?.state === state ? now.reason : undefined;
  const extras = [typeof body.deadline_s === 'number' ? `deadline ${body.deadline_s} s` : '', body.force ? 'force' : ''].filter(Boolean).join(', ');
  const verb = state === 'cordoned' ? 'cordoned' : state === 'draining' ? 'drain started' : 'uncordoned';
  return {
    reason: state === 'cordoned' ? 'cordon' : state === 'draining' ? 'drain' : 'uncordon',
    object: `node/${id}`,
    nodes: [id],
    what: `${verb}${extras ? ` (${extras})` : ''}`,
    ...(reason && state !== 'ready' ? { detail: reason } : {}),
  };
}

/** Records a described admin action: who did it is in the message, so the table shows it. */
export function recordAdmin(events: EventLog, who: string, e: AdminAction): void {
  const { what, detail, ...rest } = e;
  events.record({ ...rest, type: 'Normal', source: 'admin', who, message: `${what} by "${who}"${detail ? `: ${detail}` : ''}` });
}

/**
 * Middleware for `/api/v1`, after the token check: every write that succeeded is
 * recorded as an admin action, with the name of the token that made it. One table
 * (`ACTIONS`) rather than a line in each handler, so a handler cannot forget it.
 */
export function recordAdminActions(events: EventLog, admin: (id: string) => AdminState | undefined): RequestHandler {
  return (req, res, next) => {
    if (req.method === 'GET' || req.method === 'HEAD') return next();
    // Taken now: routers below rewrite the path while they handle the request.
    const { method, path } = req;
    const found = ACTIONS.map(([m, re, describe]) => [m === method ? re.exec(path) : null, describe] as const).find(([m]) => m);
    if (!found) return next();
    let reply: Record<string, unknown> = {};
    const json = res.json.bind(res);
    res.json = (b: unknown) => {
      reply = sub(b);
      return json(b);
    };
    res.on('finish', () => {
      // A request that changed nothing (`already` cordoned, with no new reason) is no event.
      if (res.statusCode >= 300 || (reply.already === true && !str(sub(req.body).reason))) return;
      const who = principalOf(res)?.name ?? 'unknown';
      recordAdmin(events, who, found[1](found[0]!, { method, path, body: sub(req.body), query: sub(req.query), reply, admin }));
    });
    next();
  };
}
