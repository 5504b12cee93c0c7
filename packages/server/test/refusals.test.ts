import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { caOf, jsonHeaders, liveServer, nodeAuth, type LiveServer } from './live-server.js';

/**
 * Refusals sent before the body was read reach a client that writes its whole body
 * before it reads (issue 28: 4 of 287 cases got EPIPE/ECONNRESET instead of the 413):
 * the server lingers, reading and dropping the rest of the body, before it closes.
 */

const MAX_BODY = 1024 * 1024;
/** Over every limit here: the client listener's --max-body-size and the heartbeat's 4 MB. */
const BIG = Buffer.alloc(5 * 1024 * 1024, 'a');

let live: LiveServer;
beforeAll(async () => {
  live = await liveServer({ maxBodyBytes: MAX_BODY });
});
afterAll(async () => {
  await live.close();
});

interface Case {
  name: string;
  base: () => string;
  path: string;
  headers: () => Record<string, string>;
  status: number;
}

const CASES: Case[] = [
  {
    name: 'client: a body over --max-body-size',
    base: () => live.client,
    path: '/v1/chat/completions',
    headers: () => ({ authorization: `Bearer ${live.apiKey}` }),
    status: 413,
  },
  { name: 'client: no key, a large body', base: () => live.client, path: '/v1/embeddings', headers: () => ({}), status: 401 },
  { name: 'agent: a heartbeat over 4 MB', base: () => live.admin, path: '/agent/v1/heartbeat', headers: () => ({ ...nodeAuth, ...jsonHeaders }), status: 413 },
  {
    name: 'agent: a bad credential, a large body',
    base: () => live.admin,
    path: '/agent/v1/heartbeat',
    headers: () => ({ authorization: 'Bearer nope', ...jsonHeaders }),
    status: 401,
  },
];

/**
 * A raw socket that writes the whole request, waits until every byte is handed to the
 * kernel, and only then reads: the client the reset hurt. Resolves with what it read
 * and the first error, if any.
 */
function writeThenRead(base: string, path: string, headers: Record<string, string>, body: Buffer): Promise<{ reply: string; error?: string }> {
  const url = new URL(base);
  const head =
    `POST ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${body.length}\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n';
  return new Promise((resolve) => {
    const ca = caOf(base);
    const s: net.Socket =
      url.protocol === 'https:'
        ? tls.connect({ port: Number(url.port), host: url.hostname, ...(ca ? { ca } : {}) })
        : net.connect(Number(url.port), url.hostname);
    s.pause();
    const chunks: Buffer[] = [];
    let error: string | undefined;
    s.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    s.on('close', () => resolve({ reply: Buffer.concat(chunks).toString('latin1'), ...(error ? { error } : {}) }));
    s.write(head);
    s.write(body, () => {
      s.on('data', (c: Buffer) => chunks.push(c));
      s.resume();
    });
  });
}

/** Node's http client, as the matrix used it: no agent (so `Connection: close`), the body written at once. */
function nodeClient(base: string, path: string, headers: Record<string, string>, body: Buffer): Promise<{ status?: number; error?: string }> {
  const url = new URL(base);
  const ca = caOf(base);
  const request = url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve) => {
    let status: number | undefined;
    let error: string | undefined;
    const req = request({ host: url.hostname, port: url.port, method: 'POST', path, headers, agent: false, ...(ca ? { ca } : {}) }, (res) => {
      status = res.statusCode;
      res.resume();
      res.on('end', () => resolve({ status, ...(error ? { error } : {}) }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      error ??= e.code ?? e.message;
      if (status === undefined) resolve({ error });
    });
    req.end(body);
  });
}

describe('refusals before the body is read', () => {
  it.each(CASES)('$name: a client that writes all before reading gets its $status', async (c) => {
    const r = await writeThenRead(c.base(), c.path, c.headers(), BIG);
    expect(r.reply.split('\r\n')[0]).toBe(`HTTP/1.1 ${c.status} ${http.STATUS_CODES[c.status]}`);
    expect(r.error).toBeUndefined();
  });

  it.each(CASES)("$name: Node's http client gets its $status, with no EPIPE or reset", async (c) => {
    for (let i = 0; i < 5; i++) expect(await nodeClient(c.base(), c.path, c.headers(), BIG)).toEqual({ status: c.status });
  });

  it('a kept-alive connection serves the next request after a refused body', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (body: Buffer) =>
      new Promise<number>((resolve, reject) => {
        const url = new URL(live.client);
        const req = http.request(
          { host: url.hostname, port: url.port, method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${live.apiKey}` }, agent },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect(await post(BIG)).toBe(413);
    // The model does not exist: an answer that needed the whole (small) body read.
    expect(await post(Buffer.from('{"model":"nope"}'))).toBe(404);
    agent.destroy();
  });
});
