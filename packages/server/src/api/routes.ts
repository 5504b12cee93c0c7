import type { RequestHandler, Router } from 'express';
import { audited, isAudit, type Describe } from '../events/admin-events.js';
import { methodNotAllowed } from '../http/http.js';

type Handlers = RequestHandler | RequestHandler[];

/** A write of the admin API: the event its success records, and its handlers. */
export interface Write {
  /** What a success is recorded as (`ADMIN_EVENTS` in events/admin-events.ts, or one of its own). */
  audit: Describe;
  handle: Handlers;
}

/** One path of the admin API by method: a read is its handlers, a write needs its `audit` too. */
export interface AdminMethods {
  get?: Handlers;
  post?: Write;
  put?: Write;
  patch?: Write;
  delete?: Write;
}

const WRITES = ['post', 'put', 'patch', 'delete'] as const;
const list = (h: Handlers): RequestHandler[] => (Array.isArray(h) ? h : [h]);

/**
 * Registers one path of the admin API, the way every write route is added: each write
 * behind its audit (`audited`, first, so it sees the reply), any other method a 405 with
 * `Allow` (`methodNotAllowed`, last). The types leave no way to give a write without
 * its event, and `requireAudited` refuses one registered any other way.
 *
 *     adminRoute(r, '/keys/:id', { delete: { audit: ADMIN_EVENTS.keyRevoke, handle: async (req, res) => ... } });
 */
export function adminRoute(r: Router, path: string, methods: AdminMethods): void {
  const route = r.route(path);
  if (methods.get) route.get(...list(methods.get));
  for (const m of WRITES) {
    const w = methods[m];
    if (w) route[m](audited(w.audit), ...list(w.handle));
  }
  route.all(methodNotAllowed);
}

/** What `unauditedWrites` reads of express's routers (router 2.x's layers). */
interface Layer {
  method?: string;
  handle?: unknown;
  route?: { path: unknown; stack: Layer[] };
}

const READS: ReadonlySet<string> = new Set(['get', 'head', 'options']);

/**
 * Each write route ('POST /keys') in `routers`, and in the routers they mount, whose
 * first handler for that method is not an audit: a write that would succeed with no
 * event. A middleware that answers writes without a route is not seen; the admin API
 * has none.
 */
export function unauditedWrites(routers: readonly unknown[]): string[] {
  const found: string[] = [];
  const walk = (r: unknown) => {
    const stack = (r as { stack?: unknown } | null)?.stack;
    if (!Array.isArray(stack)) return;
    for (const layer of stack as Layer[]) {
      if (!layer.route) {
        walk(layer.handle);
        continue;
      }
      const seen = new Set<string>();
      for (const l of layer.route.stack) {
        if (l.method === undefined || READS.has(l.method) || seen.has(l.method)) continue;
        seen.add(l.method);
        if (!isAudit(l.handle)) found.push(`${l.method.toUpperCase()} ${String(layer.route.path)}`);
      }
    }
  };
  for (const r of routers) walk(r);
  return found;
}

/** Throws, naming them, when any write route of `routers` records no admin event (`unauditedWrites`): the server does not start so. */
export function requireAudited(routers: readonly unknown[]): void {
  const missing = unauditedWrites(routers);
  if (missing.length) throw new Error(`admin write routes without an audit (register them with adminRoute, api/routes.ts): ${missing.join(', ')}`);
}
