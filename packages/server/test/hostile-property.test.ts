import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { adminAuth, heartbeat, nodeAuth, liveServer, send, type LiveServer, type RawRequest } from './live-server.js';

/**
 * Property-based hostile input against a real server, one surface at a time: whatever
 * arrives, the answer is never a 5xx, the server keeps answering, and a refused request
 * changes nothing (the nodes, replicas and keys lists are the same before and after).
 * Bounded: a fixed number of runs with a fixed seed, a few seconds per surface.
 */

const RUNS = 150;
const SEED = 13;

/** Strings that have broken servers: prototype keys, escapes, huge and odd numbers as text. */
const NASTY = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', '%', '%E0%A4%A', '%ZZ', '..', '', ' ', '\u0000', '1e20', '-1', 'NaN'];
const nasty = fc.constantFrom(...NASTY);
const text = fc.oneof(nasty, fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 20 }));
/** Numbers JSON can spell but JavaScript cannot hold: they are spliced into the body as raw text. */
const RAW_NUMBERS = ['1e999', '-1e999', '1e20', '-0', '0.0000001', '9007199254740993', '-1'];
const nest = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
const DEEP = '"@DEEP@"';

/** A value a hostile client might put anywhere: JSON junk, a nasty string, a raw number, deep nesting. */
const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  nasty,
  fc.constantFrom(...RAW_NUMBERS).map((n) => `@RAW@${n}`),
  fc.constant(DEEP),
  fc.double(),
  fc.integer({ min: -1e9, max: 1e9 }).map((n) => n * 1e12),
);

function serialize(value: unknown, depth: number): string {
  return JSON.stringify(value)
    .replace(/"@RAW@([^"]+)"/g, '$1')
    .replaceAll(JSON.stringify(DEEP), nest(depth));
}

/** Headers about the body: encodings and charsets, real, unknown and lying. */
const bodyHeaders = fc.record(
  {
    'content-encoding': fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'snappy', 'x-unknown', 'gzip, gzip'),
    'content-type': fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'application/json; charset=koi8-r',
      'application/json; charset=utf-16',
      'application/x-www-form-urlencoded',
      'application/x-www-form-urlencoded; charset=iso-8859-1',
      'text/plain',
      'garbage;;;=',
    ),
  },
  { requiredKeys: [] },
);

/** Gzips the body when the header says gzip, most of the time: otherwise the header lies. */
function encodeBody(body: string, headers: Record<string, string>, honest: boolean): Buffer {
  const enc = headers['content-encoding'];
  if (honest && enc === 'gzip') return zlib.gzipSync(body);
  if (honest && enc === 'deflate') return zlib.deflateSync(body);
  return Buffer.from(body);
}

/** An id for a path segment: a plain word, an escaped nasty string, or a raw bad escape. */
const segment = fc.oneof(fc.constantFrom('node-a', 'ghost', '%E0%A4%A', '%', '%ZZ', '__proto__', 'constructor'), text.map(encodeURIComponent));

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'];
const CHANGES = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);

interface Tally {
  tried: number;
  fivexx: string[];
  changed: string[];
}

describe('hostile-input properties', () => {
  let live: LiveServer;
  let session: { cookie: string; csrf: string };
  const figures: string[] = [];
  beforeAll(async () => {
    live = await liveServer();
    session = await live.login();
  });
  afterAll(async () => {
    process.stdout.write(`${figures.join('\n')}\n`);
    await live.close();
  });

  /** Sends every generated request, checking after each that it got no 5xx and, unless accepted, changed nothing. */
  async function check(name: string, gen: fc.Arbitrary<RawRequest>, base = () => live.admin) {
    const tally: Tally = { tried: 0, fivexx: [], changed: [] };
    let before = await live.state();
    await fc.assert(
      fc.asyncProperty(gen, async (req) => {
        tally.tried++;
        const r = await send(base(), req);
        const what = `${req.method ?? 'GET'} ${req.path.slice(0, 80)} -> ${r.status} ${r.body.slice(0, 120)}`;
        if (r.status >= 500) tally.fivexx.push(what);
        const accepted = r.status < 400 && CHANGES.has(req.method ?? 'GET');
        const after = await live.state();
        if (!accepted && after !== before) tally.changed.push(what);
        before = after;
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    const alive = await send(live.admin, { path: '/healthz' });
    figures.push(
      `hostile ${name}: ${tally.tried} inputs, ${tally.fivexx.length} 5xx, ${alive.status === 200 ? 0 : 1} crashes, ${tally.changed.length} refused-but-changed`,
    );
    expect(tally.fivexx).toEqual([]);
    expect(tally.changed).toEqual([]);
    expect(alive.status).toBe(200);
  }

  it('admin API (/api/v1)', async () => {
    const paths = fc.oneof(
      fc.constantFrom('/api/v1/nodes', '/api/v1/models', '/api/v1/replicas', '/api/v1/keys', '/api/v1/usage', '/metrics'),
      segment.map((id) => `/api/v1/nodes/${id}/state`),
      segment.map((id) => `/api/v1/keys/${id}`),
      segment.map((id) => `/api/v1/replicas/${id}/logs?rank=${id}`),
      segment.map((id) => `/api/v1/explain-placement?model=${id}`),
      segment.map((id) => `/api/v1/replicas?model=${id}`),
    );
    const body = fc.record(
      { state: junk, reason: junk, deadline_s: junk, force: junk, name: junk, models: junk, rpm: junk, max_concurrent: junk, expires_at: junk },
      { requiredKeys: [] },
    );
    const gen = fc
      .record({
        method: fc.constantFrom(...METHODS),
        path: paths,
        body,
        extra: fc.dictionary(nasty, junk, { maxKeys: 2 }),
        headers: bodyHeaders,
        depth: fc.integer({ min: 20, max: 3000 }),
        honest: fc.boolean(),
      })
      .map(({ method, path, body, extra, headers, depth, honest }): RawRequest => ({
        method,
        path,
        headers: { ...adminAuth, ...headers },
        body: method === 'GET' || method === 'HEAD' ? undefined : encodeBody(serialize({ ...extra, ...body }, depth), headers, honest),
      }));
    await check('admin', gen);
  });

  it('agent API (/agent/v1): heartbeats with junk, deep nesting, huge numbers and prototype keys', async () => {
    const fields = fc.constantFrom(
      'node_id',
      'hostname',
      'labels',
      'memory_total_mb',
      'cpu_cores',
      'gpus',
      'fabrics',
      'pool',
      'source_estimates',
      'estimated_sources',
      '__proto__',
      'constructor',
      'extra',
    );
    const mutation = fc.record({ where: fc.constantFrom('report', 'root', 'labels', 'gpu', 'shard'), key: fc.oneof(fields, nasty), value: junk });
    const beat = fc
      .record({
        mutations: fc.array(mutation, { minLength: 1, maxLength: 3 }),
        headers: bodyHeaders,
        depth: fc.integer({ min: 20, max: 200_000 }),
        honest: fc.boolean(),
      })
      .map(({ mutations, headers, depth, honest }): RawRequest => {
        const hb = heartbeat('fuzz') as unknown as Record<string, Record<string, unknown>> & { report: Record<string, unknown> };
        const gpu: Record<string, unknown> = { index: 0, name: 'g', class: 'c', problems: [] };
        const shard: Record<string, unknown> = { id: 's', replica_id: 'r', state: 'ready' };
        for (const m of mutations) {
          // Computed keys make own properties, so `__proto__` travels as a field.
          const target = { report: hb.report, root: hb, labels: hb.report.labels as Record<string, unknown>, gpu, shard }[m.where];
          Object.defineProperty(target, m.key, { value: m.value, enumerable: true, writable: true, configurable: true });
        }
        if (mutations.some((m) => m.where === 'gpu')) hb.report.gpus = [gpu];
        if (mutations.some((m) => m.where === 'shard')) hb.shards = [shard] as unknown as Record<string, unknown>;
        return {
          method: 'POST',
          path: '/agent/v1/heartbeat',
          headers: { ...nodeAuth, 'content-type': 'application/json', ...headers },
          body: encodeBody(serialize(hb, depth), headers, honest),
        };
      });
    // wait_ms keeps one character: a long-poll of up to 9 ms, or junk, never a 30 s wait.
    const poll = fc
      .record({ id: segment, after: text, wait: fc.oneof(text, fc.constantFrom('0', '1', '-5', '1e20')) })
      .map(({ id, after, wait }): RawRequest => ({
        path: `/agent/v1/nodes/${id}/assignments?after=${encodeURIComponent(after)}&wait_ms=${encodeURIComponent(wait).slice(0, 1)}`,
        headers: nodeAuth,
      }));
    const other = fc
      .record({
        method: fc.constantFrom(...METHODS),
        path: fc.constantFrom('/agent/v1/heartbeat', '/agent/v1/nodes/node-a/assignments?wait_ms=0', '/agent/v1/other'),
      })
      .map((r): RawRequest => ({ ...r, headers: nodeAuth }));
    // An accepted heartbeat for node "fuzz" is a legitimate change; the check allows it.
    await check('agent', fc.oneof({ arbitrary: beat, weight: 6 }, { arbitrary: poll, weight: 2 }, { arbitrary: other, weight: 1 }));
  });

  it('dashboard forms', async () => {
    const field = fc.constantFrom('token', 'next', 'csrf', 'action', 'reason', 'confirm', '__proto__', 'constructor', 'toString');
    const value = fc.oneof(
      text,
      fc.integer({ min: 0, max: 20_000 }).map((n) => 'x'.repeat(n)),
    );
    const gen = fc
      .record({
        path: fc.oneof(
          fc.constantFrom('/login', '/'),
          segment.map((id) => `/nodes/${id}/state`),
          segment.map((id) => `/models/${id}`),
          segment.map((id) => `/nodes/${id}/drain`),
        ),
        method: fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE'),
        fields: fc.array(fc.tuple(field, value), { maxLength: 40 }),
        withSession: fc.boolean(),
        withCsrf: fc.boolean(),
        action: fc.oneof(nasty, fc.constantFrom('cordon', 'uncordon', 'drain')),
        headers: bodyHeaders,
        honest: fc.boolean(),
      })
      .map(({ path, method, fields, withSession, withCsrf, action, headers, honest }): RawRequest => {
        const pairs = [...fields, ...(withCsrf ? [['csrf', session.csrf] as const] : []), ['action', action] as const];
        const body = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
        const h: Record<string, string> = {
          'content-type': 'application/x-www-form-urlencoded',
          ...headers,
          ...(withSession ? { cookie: session.cookie } : {}),
        };
        return { method, path, headers: h, body: method === 'GET' ? undefined : encodeBody(body, h, honest) };
      });
    await check('dashboard', gen);
  });
});
