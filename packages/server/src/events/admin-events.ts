import type { NodeAdminState } from '@llmgw/shared';
import { NodeStateAliases } from '@llmgw/shared';
import type { RequestHandler, Response } from 'express';
import { principalOf } from '../http/principal.js';
import type { AdminState } from '../domain.js';
import { DomainError } from '../errors.js';
import type { EventLog, NewEvent } from './event-log.js';

/** What an admin write's event is made of, once the write succeeded. */
export interface Done {
  /** The route's parameters (`:id`), decoded. */
  params: Readonly<Record<string, string>>;
  body: Record<string, unknown>;
  query: Record<string, unknown>;
  /** The JSON the handler answered with. */
  reply: Record<string, unknown>;
  /** A node's admin state as it is now. */
  admin(id: string): AdminState | undefined;
}

/** An admin action, described: `what` was done (and `detail`, such as the reason) by whom is added when recorded. */
export type AdminAction = Omit<NewEvent, 'type' | 'source' | 'who' | 'message'> & { what: string; detail?: string };

/** How a write route's success is recorded: the `audit` of `adminRoute` (api/routes.ts). */
export type Describe = (d: Done) => AdminAction;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
const sub = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' ? (v as Record<string, unknown>) : {});
const param = (d: Done, name: string): string => d.params[name] ?? '';

/**
 * The events of the admin API's writes, each given to its route as its `audit`. A new
 * write route says its own here (or beside it): `adminRoute` will not register one without.
 */
export const ADMIN_EVENTS = {
  /** `POST /nodes/:id/state`: cordon, uncordon, drain. */
  nodeState: (d) => {
    const id = param(d, 'id');
    const state = Object.hasOwn(NodeStateAliases, String(d.body.state)) ? NodeStateAliases[String(d.body.state)] : undefined;
    return nodeStateEvent(id, state ?? 'ready', d.admin(id), d.body);
  },
  /** `DELETE /nodes/:id`. */
  nodeDelete: (d) => ({
    reason: 'node-delete',
    object: `node/${param(d, 'id')}`,
    nodes: [param(d, 'id')],
    what: d.query.force === 'true' ? 'deleted (--force)' : 'deleted',
  }),
  /** `POST /nodes/:id/approve`. */
  nodeApprove: (d) => ({ reason: 'node-approve', object: `node/${param(d, 'id')}`, nodes: [param(d, 'id')], what: 'approved' }),
  /** `POST /join-token/rotate`. */
  joinTokenRotate: () => ({ reason: 'join-token-rotate', object: 'join-token', what: 'rotated', detail: 'the old token no longer joins' }),
  /** `POST /tokens`. */
  tokenCreate: (d) => {
    const t = sub(d.reply.token);
    return { reason: 'token-create', object: `token/${String(t.id)}`, what: 'created', detail: `for "${String(t.name)}", role ${String(t.role)}` };
  },
  /** `DELETE /tokens/:id`. */
  tokenRevoke: (d) => ({ reason: 'token-revoke', object: `token/${str(d.reply.id) ?? param(d, 'id')}`, what: 'revoked', detail: `"${String(d.reply.name)}"` }),
  /** `POST /keys`. */
  keyCreate: (d) => {
    const k = sub(d.reply.key);
    return { reason: 'key-create', object: `key/${String(k.id)}`, what: 'created', detail: `for "${String(k.name)}"` };
  },
  /** `PATCH /keys/:id`: what changed, as asked (`null` removes a limit). */
  keyUpdate: (d) => {
    const changes = Object.entries(d.body)
      .map(([f, v]) => `${f} ${v === null ? 'removed' : Array.isArray(v) ? v.map(String).join(',') || '(all)' : JSON.stringify(v).replace(/^"|"$/g, '')}`)
      .join(', ');
    return {
      reason: 'key-update',
      object: `key/${str(d.reply.id) ?? param(d, 'id')}`,
      what: 'updated',
      detail: `"${String(d.reply.name)}": ${changes || 'nothing'}`,
    };
  },
  /** `POST /models/:name/rollout/pause`. */
  rolloutPause: (d) => ({ reason: 'rollout-pause', object: `model/${String(d.reply.model)}`, model: String(d.reply.model), what: 'rollout paused' }),
  /** `POST /models/:name/rollout/resume`. */
  rolloutResume: (d) => ({
    reason: 'rollout-resume',
    object: `model/${String(d.reply.model)}`,
    model: String(d.reply.model),
    what: 'rollout resumed',
    detail: `revision ${String(d.reply.revision)}`,
  }),
  /** `DELETE /keys/:id`. */
  keyRevoke: (d) => ({ reason: 'key-revoke', object: `key/${str(d.reply.id) ?? param(d, 'id')}`, what: 'revoked', detail: `"${String(d.reply.name)}"` }),
} satisfies Record<string, Describe>;

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

/** Where the audits of one request record: put in `res.locals` by `adminAudit`. */
interface AuditSink {
  events: EventLog;
  admin: (id: string) => AdminState | undefined;
}

const SINK = 'adminAudit';

/**
 * Middleware for `/api/v1`, after the token check and ahead of every router: gives the
 * write routes' audits (`audited`) the event log they record into.
 */
export function adminAudit(events: EventLog, admin: (id: string) => AdminState | undefined): RequestHandler {
  const sink: AuditSink = { events, admin };
  return (_req, res, next) => {
    res.locals[SINK] = sink;
    next();
  };
}

/** The handlers `audited` made, so that a route's stack shows whether it has one (`unauditedWrites`). */
const AUDITS = new WeakSet<object>();

/** Whether `handler` is a write route's audit. */
export function isAudit(handler: unknown): boolean {
  return typeof handler === 'function' && AUDITS.has(handler);
}

/**
 * The first handler of a write route (`adminRoute` puts it there): once the write
 * succeeded, records `describe`'s event with the name of the token that made it. A
 * request that changed nothing (`already` cordoned, with no new reason) is no event.
 * Without `adminAudit` ahead of it the write is refused (500) rather than done unrecorded.
 */
export function audited(describe: Describe): RequestHandler {
  const handler: RequestHandler = (req, res, next) => {
    const sink = (res.locals as Record<string, unknown>)[SINK] as AuditSink | undefined;
    if (!sink)
      return next(
        new DomainError('internal', `${req.method} ${req.baseUrl}${req.path} has no event log to record into (adminAudit is not mounted ahead of it)`),
      );
    // Taken now: the parameters are the route's, and another router may set its own later.
    const params = { ...(req.params as Record<string, string>) };
    let reply: Record<string, unknown> = {};
    const json = res.json.bind(res) as Response['json'];
    res.json = (b: unknown) => {
      reply = sub(b);
      return json(b);
    };
    res.on('finish', () => {
      if (res.statusCode >= 300 || (reply.already === true && !str(sub(req.body).reason))) return;
      const who = principalOf(res)?.name ?? 'unknown';
      recordAdmin(sink.events, who, describe({ params, body: sub(req.body), query: sub(req.query), reply, admin: sink.admin }));
    });
    next();
  };
  AUDITS.add(handler);
  return handler;
}
