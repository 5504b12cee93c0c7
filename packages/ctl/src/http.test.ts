import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HTTPError, RequestError, request } from './http.js';
import { sentNothing } from './client.js';

/** A server that records what it got and answers as `answer` says (`hang`: never). */
let answer: { status: number; body: string } | 'hang' = { status: 200, body: '[]' };
const seen: { method?: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    seen.push({ method: req.method, headers: req.headers, body });
    if (answer === 'hang') return;
    res.writeHead(answer.status, { 'content-type': 'application/json', 'x-next-cursor': 'c1' }).end(answer.body);
  });
});
let base = '';

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe('request: the admin API over node:http(s)', () => {
  // 9 characters, 10 bytes: the length is in bytes.
  it('sends JSON with its type and length, and reads the answer with its headers', async () => {
    answer = { status: 201, body: '{"ok":true}' };
    const reply = await request(`${base}/x`, { method: 'POST', json: { a: 'é' }, headers: { authorization: 'Bearer t' } });
    expect(reply).toMatchObject({ statusCode: 201, body: '{"ok":true}' });
    expect(reply.headers['x-next-cursor']).toBe('c1');
    const got = seen.at(-1)!;
    expect(got).toMatchObject({ method: 'POST', body: '{"a":"é"}' });
    expect(got.headers).toMatchObject({ 'content-type': 'application/json', 'content-length': '10', authorization: 'Bearer t' });
  });

  it('an answer outside 2xx is an HTTPError with its status and body, sent (not a write to repeat elsewhere)', async () => {
    answer = { status: 503, body: '{"error":"busy"}' };
    const err = await request(`${base}/x`, { method: 'POST', json: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HTTPError);
    expect((err as HTTPError).response).toMatchObject({ statusCode: 503, body: '{"error":"busy"}' });
    expect(sentNothing(err)).toBe(false);
  });

  it('gives up after the request timeout with ETIMEDOUT, the connection made', async () => {
    answer = 'hang';
    const err = await request(`${base}/x`, { method: 'GET', requestTimeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestError);
    expect(err).not.toBeInstanceOf(HTTPError);
    expect((err as RequestError).code).toBe('ETIMEDOUT');
    expect((err as RequestError).timings.connect).toBeDefined();
    expect(sentNothing(err)).toBe(false);
  });
});
