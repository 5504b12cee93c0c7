import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { REPORT_LIMITS, type Heartbeat } from '@llmgw/shared';
import { makeReport } from '../../test/factories.js';
import type { Controller } from '../controller/controller.js';
import type { Membership } from '../credentials/membership.js';
import { Turns } from '../http/turns.js';
import { leanHeartbeat } from './heartbeat.js';
import { NodeCap } from './node-caps.js';

/**
 * Which requests the lean path takes: a plain heartbeat, and nothing else. Whatever it
 * does not take reaches the fallback here (599, standing in for express) untouched, body
 * and all; test/heartbeat-paths.test.ts shows both paths answer alike on a real server.
 */

const taken: Heartbeat[] = [];
const ctl = {
  now: () => 0,
  heartbeat: (hb: Heartbeat) => (taken.push(hb), { ok: true }),
  refuseReport: () => undefined,
} as unknown as Controller;
const membership = { credentials: { nodeOf: (t: string) => (t === 'cred-a' ? 'node-a' : undefined) } } as unknown as Membership;
const cap = new NodeCap(2, 'requests', '--node-max-requests');

let server: http.Server;
let port = 0;
beforeAll(async () => {
  const lean = leanHeartbeat({ ctl, allowLoopbackNodes: true }, membership, cap, new Turns());
  server = http.createServer((req, res) => {
    if (lean(req, res)) return;
    // The fallback reads what the lean path left: all of it.
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => res.writeHead(599, { 'x-body-bytes': String(Buffer.concat(chunks).length) }).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

interface Sent {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}
function post({
  method = 'POST',
  path = '/agent/v1/heartbeat',
  headers = {},
  body = beat,
}: Sent): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { port, host: '127.0.0.1', method, path, agent: false, headers: { authorization: 'Bearer cred-a', 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const beat = JSON.stringify({ report: makeReport({ node_id: 'node-a', mgmt_addr: '127.0.0.1' }), shards: [] });

describe('the lean heartbeat path', () => {
  it('takes a plain heartbeat and answers what the controller says', async () => {
    const before = taken.length;
    for (const headers of [{}, { 'content-type': 'application/json; charset=utf-8' }, { 'content-encoding': 'identity' }] as Record<string, string>[]) {
      const r = await post({ headers });
      expect([r.status, r.body]).toEqual([200, '{"ok":true}']);
    }
    expect(taken.length - before).toBe(3);
    expect(taken.at(-1)?.report.node_id).toBe('node-a');
  });

  it.each<[string, Sent]>([
    ['a query string', { path: '/agent/v1/heartbeat?x=1' }],
    ['another path', { path: '/agent/v1/heartbeats' }],
    ['a GET', { method: 'GET', body: '' }],
    ['a chunked body', { headers: { 'transfer-encoding': 'chunked' } }],
    ['a gzipped body', { headers: { 'content-encoding': 'gzip' }, body: zlib.gzipSync(beat) }],
    ['another charset', { headers: { 'content-type': 'application/json; charset=latin1' } }],
    ['another type', { headers: { 'content-type': 'text/plain' } }],
    ['an unknown credential', { headers: { authorization: 'Bearer nope' } }],
    ['no credential', { headers: { authorization: '' } }],
    ['a body over the limit', { body: `{"x":"${'y'.repeat(REPORT_LIMITS.heartbeatBytes)}"}` }],
  ])('leaves %s to express, body unread', async (_name, sent) => {
    const before = taken.length;
    const r = await post(sent);
    expect(r.status).toBe(599);
    const bytes = sent.body === undefined ? Buffer.byteLength(beat) : Buffer.byteLength(sent.body);
    expect(Number(r.headers['x-body-bytes'])).toBe(bytes);
    expect(taken.length).toBe(before);
  });

  it.each([
    ['not JSON', '{"report":', 400, 'invalid_json'],
    ['a number', '5', 400, 'invalid_json'],
    ['too deep', `{"a":${'['.repeat(200)}${']'.repeat(200)}}`, 400, 'invalid_request'],
    ['no report', '{}', 400, 'invalid_request'],
    ['another node', JSON.stringify({ report: makeReport({ node_id: 'node-b', mgmt_addr: '127.0.0.1' }), shards: [] }), 403, 'forbidden'],
  ])('answers %s with the admin error body, taking nothing', async (_name, body, status, code) => {
    const before = taken.length;
    const r = await post({ body });
    expect(r.status).toBe(status);
    expect(JSON.parse(r.body)).toMatchObject({ code });
    expect(taken.length).toBe(before);
  });

  it('counts toward the node cap: a node at its cap gets a 429 with Retry-After and nothing is read', async () => {
    const closed = new EventEmitter();
    expect([cap.enter('node-a', closed), cap.enter('node-a', closed)]).toEqual([undefined, undefined]);
    const before = taken.length;
    const r = await post({});
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('1');
    expect(JSON.parse(r.body)).toMatchObject({ code: 'concurrency_limited' });
    expect(taken.length).toBe(before);
    closed.emit('close');
    expect((await post({})).status).toBe(200);
  });
});
