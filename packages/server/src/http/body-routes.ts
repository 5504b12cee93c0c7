import type { RequestHandler } from 'express';

/** How a route reads its body: JSON (the APIs) or a urlencoded form (the dashboard). */
export type BodyKind = 'json' | 'form';

/** One route that reads a request body, and the most bytes it reads before a 413. */
export interface BodyRoute {
  /** Which listener serves it. */
  listener: 'admin' | 'client';
  method: string;
  /** Express's path, with its `:params`. */
  path: string;
  kind: BodyKind;
  limitBytes: number;
}

/** The body parsers made by `bodyParser`, with what they read: how a walk of the routers finds them. */
const PARSERS = new WeakMap<object, { kind: BodyKind; limitBytes: number }>();

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };

/** A limit as body-parser takes it (`64kb`, `1048576b`, a number of bytes) in bytes, read as body-parser reads it (1 kb = 1024 b). */
export function limitBytes(limit: string | number): number {
  if (typeof limit === 'number') return limit;
  const m = /^(\d+)(b|kb|mb)$/i.exec(limit.trim());
  if (!m) throw new Error(`a body limit is N, Nb, Nkb or Nmb, not "${limit}"`);
  return Number(m[1]) * UNITS[m[2]!.toLowerCase()]!;
}

/**
 * Marks `parser` as the body parser of the routes it is given to, reading at most
 * `limit`: so that `bodyRoutes` lists every route that takes a body and its limit from
 * the routers themselves, and a test can send each one bodies around its limit.
 */
export function bodyParser(parser: RequestHandler, kind: BodyKind, limit: string | number): RequestHandler {
  PARSERS.set(parser, { kind, limitBytes: limitBytes(limit) });
  return parser;
}

/** The names body-parser gives the middleware it makes: a parser on a route that `bodyParser` did not mark is one of these. */
const BODY_PARSER_NAMES: ReadonlySet<string> = new Set(['jsonParser', 'urlencodedParser', 'rawParser', 'textParser']);

/** What `bodyRoutes` reads of express's routers (router 2.x's layers). */
interface Layer {
  method?: string;
  handle?: unknown;
  rawPath?: unknown;
  route?: { path: unknown; stack: Layer[] };
}

/**
 * Every route of `router` (an express app's router, or any router), and of the routers
 * it mounts, whose handlers for a method include a parser marked by `bodyParser`, with
 * its full path. A parser used as router-level middleware (`r.use(parser)`) is not a
 * route's and is not seen; none of ours is. Throws on a route whose body parser was not
 * made through `bodyParser`, whose limit it could not list.
 */
export function bodyRoutes(router: unknown, listener: BodyRoute['listener']): BodyRoute[] {
  const found: BodyRoute[] = [];
  const walk = (r: unknown, prefix: string) => {
    const stack = (r as { stack?: unknown } | null)?.stack;
    if (!Array.isArray(stack)) return;
    for (const layer of stack as Layer[]) {
      if (!layer.route) {
        const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
        walk(layer.handle, prefix + mount);
        continue;
      }
      const path = prefix + String(layer.route.path);
      for (const l of layer.route.stack) {
        if (typeof l.handle !== 'function' || !l.method) continue;
        const parser = PARSERS.get(l.handle);
        if (parser) found.push({ listener, method: l.method.toUpperCase(), path, ...parser });
        else if (BODY_PARSER_NAMES.has(l.handle.name))
          throw new Error(`${l.method.toUpperCase()} ${path} reads its body with a parser not made through bodyParser (http/body-routes.ts)`);
      }
    }
  };
  walk(router, '');
  return found;
}
