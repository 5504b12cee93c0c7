import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { BodyRoute } from '../src/http/body-routes.js';
import { ENDPOINTS } from '../src/gateway/request.js';
import { CLIENTS, closeFetch, type ClientName, type Got, type Transfer } from './body-clients.js';
import { ADMIN, JOIN, adminAuth, bearer, liveServer, nodeAuth, type LiveServer } from './live-server.js';

/**
 * The 413 matrix (issue 28): every route of both listeners that reads a body, as the
 * routers themselves list it (`RunningServer.bodyRoutes`, so a new route is in it the
 * day it is added), sent bodies just under, at and just over its limit, 4 times it and
 * 11 MiB, with Content-Length and chunked, by three clients that write their whole body
 * before they read. Every body over the limit gets the 413 with the surface's own error
 * body, never EPIPE or a reset; every other gets an answer that is not a 413.
 */

/** The client listener's limit (--max-body-size) here: small, so 4 times it stays quick to send. */
const MAX_BODY = 1024 * 1024;
const BIG = 11 * 1024 * 1024;
/** Cases in flight at once: enough to overlap the waits, few enough for a loaded 2-core machine. */
const PARALLEL = 4;

const SIZES: [string, (limit: number) => number][] = [
  ['just under', (l) => l - 1],
  ['at', (l) => l],
  ['just over', (l) => l + 1],
  ['4x', (l) => 4 * l],
  ['11 MiB', () => BIG],
];
const TRANSFERS: Transfer[] = ['content-length', 'chunked'];
const CLIENT_NAMES = Object.keys(CLIENTS) as ClientName[];

/** What a route's `:params` are filled with: things that exist, so nothing is refused for its path. */
const PARAMS: Record<string, string> = { id: 'node-a', name: 'cold' };

let live: LiveServer;
let session: { cookie: string; csrf: string };
let routes: BodyRoute[];
beforeAll(async () => {
  // Joins are rate-limited before their body is read: the matrix's joins must not use up the burst.
  live = await liveServer({ maxBodyBytes: MAX_BODY, joinRate: 10_000 });
  session = await live.login();
  routes = live.running.bodyRoutes();
});
afterAll(async () => {
  await closeFetch();
  await live?.close();
});

/** The credentials that take a request to `route`'s body parser: by listener and path, so a route under a new prefix fails loudly. */
function credentials(route: BodyRoute): Record<string, string> {
  if (route.listener === 'client') return bearer(live.apiKey);
  if (route.path.startsWith('/api/v1/')) return adminAuth;
  if (route.path === '/agent/v1/join') return bearer(JOIN);
  if (route.path.startsWith('/agent/v1/')) return nodeAuth;
  if (route.kind === 'form') return { cookie: session.cookie };
  throw new Error(`no credentials known for ${route.method} ${route.path}: add its prefix to credentials()`);
}

/** A body of exactly `size` bytes of the route's kind, one no handler acts on (a field nothing knows). */
function bodyOf(kind: BodyRoute['kind'], size: number): Buffer {
  if (kind === 'form') return Buffer.concat([Buffer.from('pad='), Buffer.alloc(size - 4, 'a')]);
  return Buffer.concat([Buffer.from('{"pad":"'), Buffer.alloc(size - 10, 'a'), Buffer.from('"}')]);
}

/** Whether `got` carries the surface's own 413 body: OpenAI's shape on the client listener, ours on the APIs, a page on the dashboard. */
function isOurRefusal(route: BodyRoute, got: Got): boolean {
  const text = got.body ?? '';
  if (route.kind === 'form') return (got.contentType ?? '').startsWith('text/html') && text.includes('request body too large');
  try {
    const body = JSON.parse(text) as { code?: string; error?: { code?: string } };
    return route.listener === 'client' ? body.error?.code === 'request_too_large' : body.code === 'too_large';
  } catch {
    return false;
  }
}

interface Case {
  route: BodyRoute;
  size: string;
  bytes: number;
  transfer: Transfer;
  client: ClientName;
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const route of routes)
    for (const [size, of] of SIZES)
      for (const transfer of TRANSFERS) for (const client of CLIENT_NAMES) out.push({ route, size, bytes: of(route.limitBytes), transfer, client });
  return out;
}

/** What is wrong with one case's answer, or undefined. */
async function run(c: Case): Promise<string | undefined> {
  const { route } = c;
  const got = await CLIENTS[c.client]({
    base: route.listener === 'client' ? live.client : live.admin,
    method: route.method,
    path: route.path.replace(/:(\w+)/g, (_m, p: string) => PARAMS[p] ?? 'x'),
    headers: { ...credentials(route), 'content-type': route.kind === 'form' ? 'application/x-www-form-urlencoded' : 'application/json' },
    body: bodyOf(route.kind, c.bytes),
    transfer: c.transfer,
  });
  const over = c.bytes > route.limitBytes;
  const name = `${route.method} ${route.path} (${route.listener}, limit ${route.limitBytes}) ${c.size} (${c.bytes} B) ${c.transfer} ${c.client}`;
  const seen = `status ${got.status ?? '-'}${got.error ? `, error ${got.error}` : ''}: ${(got.body ?? '').slice(0, 120)}`;
  if (got.error) return `${name}: ${seen}`;
  if (over && (got.status !== 413 || !isOurRefusal(route, got))) return `${name}: want our 413, got ${seen}`;
  if (!over && (got.status === undefined || got.status === 413)) return `${name}: want an answer other than 413, got ${seen}`;
  return undefined;
}

/** `fn` over `items`, `n` at a time, in order of the results. */
async function pool<T, R>(items: T[], n: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

describe('the 413 matrix', () => {
  it('lists every route that reads a body, from the routers', () => {
    const names = routes.map((r) => `${r.method} ${r.path}`);
    // The routers, not a copy of them: each kind of surface is there, and the client's endpoints all are.
    expect(names).toEqual(expect.arrayContaining(['POST /agent/v1/heartbeat', 'POST /agent/v1/join', 'POST /api/v1/keys', 'POST /login']));
    for (const p of ENDPOINTS) expect(names).toContain(`POST ${p}`);
    expect(new Set(names).size).toBe(names.length);
    for (const r of routes) expect(r.limitBytes).toBeGreaterThan(10);
    // The admin token never reaches a body here by accident: it is for the admin API only.
    expect(credentials(routes.find((r) => r.path === '/api/v1/keys')!)).toEqual({ authorization: `Bearer ${ADMIN}` });
  });

  it('answers every body over its limit with our 413, and no other body with one', async () => {
    const all = cases();
    const t0 = Date.now();
    const failures = (await pool(all, PARALLEL, run)).filter((f): f is string => f !== undefined);
    const over = all.filter((c) => c.bytes > c.route.limitBytes).length;
    process.stdout.write(
      `413 matrix: ${all.length} cases (${routes.length} routes x ${SIZES.length} sizes x ${TRANSFERS.length} transfers x ${CLIENT_NAMES.length} clients; ` +
        `${over} over the limit), ${failures.length} failed, in ${Date.now() - t0} ms\n`,
    );
    expect(all.length).toBeGreaterThanOrEqual(287);
    expect(failures).toEqual([]);
  }, 120_000);
});
