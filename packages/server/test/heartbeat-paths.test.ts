import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { REPORT_LIMITS } from '@llmgw/shared';
import { makeReportOfBytes } from './factories.js';
import { caOf, heartbeat, jsonHeaders, liveServer, nodeAuth, send, type LiveServer, type Reply } from './live-server.js';

/**
 * A heartbeat takes one of two paths on a real server: the lean one (api/heartbeat.ts)
 * for a plain body with Content-Length, express's route for the rest (chunked here). A
 * node cannot tell them apart: each body below gets the same status, code, field and
 * words from both, and both count toward the one per-node cap.
 */

const beat = (body: string, headers: Record<string, string> = {}) => ({
  method: 'POST',
  path: '/agent/v1/heartbeat',
  headers: { ...nodeAuth, ...jsonHeaders, ...headers },
  body,
});
/** The answer as a node reads it: what the server says and how long until it changes its mind aside. */
const seen = (r: Reply) => ({
  status: r.status,
  type: r.headers['content-type'],
  body: JSON.parse(r.body, (k, v: unknown) => (k.endsWith('_ms') || k === 'now' ? 0 : v)) as unknown,
});

const plain = JSON.stringify(heartbeat('node-a'));
const BODIES: [name: string, body: string, status: number][] = [
  ['a real heartbeat', plain, 200],
  ['a real heartbeat after a BOM', `\ufeff${plain}`, 200],
  ['an empty body', '', 400],
  ['only spaces', '   ', 400],
  ['not JSON', '{"report":', 400],
  ['a number', '5', 400],
  ['a string', '"beat"', 400],
  ['an array', '[]', 400],
  ['another node', JSON.stringify(heartbeat('node-b')), 403],
  ['a report without node_id', JSON.stringify({ report: { hostname: 'x' }, shards: [] }), 400],
  ['nested 5,000 deep', `{"report":${JSON.stringify(heartbeat('node-a').report).slice(0, -1)},"x":${'['.repeat(5000)}${']'.repeat(5000)}},"shards":[]}`, 400],
  ['a loopback mgmt_addr (--allow-loopback-nodes)', JSON.stringify(heartbeat('node-a', { mgmt_addr: '127.0.0.1' })), 200],
  ['an mgmt_addr of 0.0.0.0', JSON.stringify(heartbeat('node-a', { mgmt_addr: '0.0.0.0' })), 400],
];

let live: LiveServer;
beforeAll(async () => {
  live = await liveServer({}, { allowLoopbackNodes: true, nodeMaxRequests: 1 });
});
afterAll(async () => live?.close());

describe('the heartbeat answers alike on both paths', () => {
  it.each(BODIES)('%s', async (_name, body, status) => {
    const lean = await send(live.admin, beat(body));
    const chunked = await send(live.admin, beat(body, { 'transfer-encoding': 'chunked' }));
    const gzipped = await send(live.admin, { ...beat('', { 'content-encoding': 'gzip' }), body: zlib.gzipSync(body) });
    expect(lean.status).toBe(status);
    expect(seen(lean)).toEqual(seen(chunked));
    expect(seen(lean)).toEqual(seen(gzipped));
  });

  it('a charset body-parser also takes (utf-8 in quotes, any case) is taken; another is refused with 415 on the long way', async () => {
    expect((await send(live.admin, beat(plain, { 'content-type': 'Application/JSON; charset="UTF-8"' }))).status).toBe(200);
    const latin = await send(live.admin, beat(plain, { 'content-type': 'application/json; charset=latin1' }));
    expect(latin.status).toBe(415);
    expect(JSON.parse(latin.body)).toMatchObject({ field: 'content-type' });
  });

  it('an unknown credential is a 401 either way', async () => {
    for (const headers of [{ authorization: 'Bearer nope' }, { authorization: 'Bearer nope', 'transfer-encoding': 'chunked' }] as Record<string, string>[]) {
      const r = await send(live.admin, beat(plain, headers));
      expect(r.status).toBe(401);
    }
  });
});

describe('the report cap', () => {
  it('counts a gzipped report as it is, not by its few compressed bytes', async () => {
    const body = JSON.stringify({ report: makeReportOfBytes('node-a', REPORT_LIMITS.reportBytes + 1, { mgmt_addr: '127.0.0.1' }), shards: [] });
    const gz = zlib.gzipSync(body);
    expect(gz.length * 6).toBeLessThan(REPORT_LIMITS.reportBytes);
    const r = await send(live.admin, { ...beat('', { 'content-encoding': 'gzip' }), body: gz });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'too_large', field: 'report' });
    // Plain, the same report is counted too.
    expect((await send(live.admin, beat(body))).status).toBe(413);
  });
});

describe('one per-node cap for both paths', () => {
  it('each finished heartbeat gives its place back (cap 1, three in a row)', async () => {
    for (let i = 0; i < 3; i++) expect((await send(live.admin, beat(plain))).status).toBe(200);
  });

  it('while a long-poll holds the one place, a lean heartbeat is a 429 with Retry-After', async () => {
    const url = new URL(live.admin);
    const ca = caOf(live.admin);
    const now = await send(live.admin, { path: '/agent/v1/nodes/node-a/assignments?after=-1', headers: nodeAuth });
    const { version } = JSON.parse(now.body) as { version: number };
    // Held: waits for assignments newer than these, for up to 30 s.
    const held = (url.protocol === 'https:' ? https : http).request({
      host: url.hostname,
      port: url.port,
      path: `/agent/v1/nodes/node-a/assignments?after=${version}&wait_ms=30000`,
      headers: nodeAuth,
      agent: false,
      ...(ca ? { ca } : {}),
    });
    held.on('error', () => undefined);
    const sent = new Promise<void>((resolve) =>
      held.on('socket', (s) => s.once('secureConnect', () => resolve()).once('connect', () => url.protocol === 'http:' && resolve())),
    );
    held.end();
    await sent;
    // The server counts the long-poll once it has read its headers; ask until it has.
    let r: Reply = await send(live.admin, beat(plain));
    for (let i = 0; r.status === 200 && i < 50; i++) r = await send(live.admin, beat(plain));
    held.destroy();
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('1');
    expect(JSON.parse(r.body)).toMatchObject({ code: 'concurrency_limited' });
  });
});
