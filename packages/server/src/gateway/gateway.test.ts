import http from 'node:http';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { Model } from '@llmgw/shared';
import type { Controller, RouteTarget } from '../controller/controller.js';
import { Gateway } from './gateway.js';
import { KeyRing } from './keys.js';
import { Metrics } from '../metrics.js';
import { memoryStore } from '../../test/factories.js';

type Upstream = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A gateway in front of one fake engine, with one API key. */
async function setup(upstream: Upstream, settings: Partial<ConstructorParameters<typeof Gateway>[3]> = {}, replicas = 1, scaling?: Model['scaling']) {
  const engineUrl = await listen(upstream);
  const model: Model = { name: 'm', source: 'x', profiles: [{ name: 'cpu', engine: 'llama.cpp' }], ...(scaling ? { scaling } : {}) };
  // A model that scales from zero has no replica until the gateway asks for one.
  let started = !scaling || scaling.min > 0;
  const targets: RouteTarget[] = Array.from({ length: replicas }, (_, i) => ({ replicaId: `r-${i + 1}`, endpoint: engineUrl, apiKey: 'k' }));
  const ctl = {
    catalogView: { models: [model], resolve: (n: string) => (n === 'm' ? model : undefined), suggest: () => [] },
    models: [model],
    startedAtMs: Date.now(),
    routes: (name: string) => (name === 'm' && started ? targets : []),
    listReplicas: () => [],
    lastAttempt: () => undefined,
    notify: () => void setTimeout(() => (started = true), 20),
    events: new EventEmitter(),
  } as unknown as Controller;
  const store = memoryStore();
  const keys = new KeyRing(store);
  const { secret } = keys.create({ name: 'test' }, (n) => n);
  const gw = new Gateway(
    ctl,
    keys,
    new Metrics(),
    { maxBodyBytes: 1 << 20, upstreamTimeoutMs: 5000, cooldownMs: 1000, keepAliveMs: 10_000, coldStartTimeoutMs: 1000, ...settings },
    pino({ level: 'silent' }),
  );
  const url = await listen(gw.handle);
  closers.push(async () => {
    keys.close();
    await gw.close();
  });
  return { url, secret, keys, store, gw };
}

async function post(url: string, secret: string, body: unknown): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const headers: http.IncomingHttpHeaders = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  return { status: res.status, text: await res.text(), headers };
}

/** The JSON an answer carries: a completion, or an OpenAI-style error. */
type Reply = { id: string; error: { code: string; message: string } };
const reply = (text: string) => JSON.parse(text) as Reply;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes each piece as its own TCP write, a little apart, so they arrive as separate chunks. */
function sse(pieces: (string | Buffer)[]): Upstream {
  return (req, res) => {
    req.resume();
    const writeAll = async () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const p of pieces) {
        res.write(p);
        await sleep(30);
      }
      res.end();
    };
    req.on('end', () => void writeAll());
  };
}

describe('gateway SSE pass-through', () => {
  it('forwards a multi-byte character split across two chunks intact', async () => {
    const event = Buffer.from('data: {"choices":[{"delta":{"content":"héllo €"}}]}\n\n', 'utf8');
    const cut = event.indexOf(Buffer.from('€')) + 1; // inside the three bytes of €
    const { url, secret } = await setup(sse([event.subarray(0, cut), event.subarray(cut), 'data: [DONE]\n\n']));
    const r = await post(url, secret, { model: 'm', stream: true, messages: [] });
    expect(r.status).toBe(200);
    expect(r.text).toContain('"content":"héllo €"');
    expect(r.text).not.toContain('\uFFFD');
    expect(r.text).toBe(`${event.toString('utf8')}data: [DONE]\n\n`);
  });

  it('forwards a data event split over two chunks intact and drops a split usage event the client did not ask for', async () => {
    const usage = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n';
    const { url, secret, keys, store } = await setup(
      sse(['data: {"choices":[{"delta":{"cont', 'ent":"hi"}}]}\n\n', usage.slice(0, 25), usage.slice(25), 'data: [DONE]\n\n']),
    );
    const r = await post(url, secret, { model: 'm', stream: true, messages: [] });
    expect(r.text).toBe('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
    keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, promptTokens: 7, completionTokens: 3 })]);
  });
});

describe('gateway non-streaming', () => {
  /** The first request gets headers and part of a body, then the connection dies. */
  const failFirst = (): Upstream => {
    let calls = 0;
    return (req, res) => {
      req.resume();
      req.on('end', () => {
        if (++calls === 1) {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
          res.write('{"id":');
          setTimeout(() => res.destroy(), 20);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id":"ok","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}');
      });
    };
  };

  it('tries another replica when the engine dies while sending a body the client has not seen yet', async () => {
    const { url, secret, store, keys } = await setup(failFirst(), {}, 2);
    const r = await post(url, secret, { model: 'm', messages: [] });
    expect(r.status).toBe(200);
    expect(reply(r.text).id).toBe('ok');
    keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, promptTokens: 1, completionTokens: 2 })]);
  });

  it('answers a retryable 503, not an internal 500, when the only replica dies mid-body', async () => {
    const { url, secret, store, keys } = await setup(failFirst());
    const r = await post(url, secret, { model: 'm', messages: [] });
    expect(r.status).toBe(503);
    expect(reply(r.text).error.code).toBe('no_ready_replica');
    keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1 })]);
  });
});

describe('gateway cold start', () => {
  it('puts an engine error in the stream when a cold-start stream already said 200', async () => {
    const { url, secret, store, keys } = await setup(
      (req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'prompt is too long', type: 'invalid_request_error', param: null, code: 'context_length_exceeded' } }));
        });
      },
      {},
      1,
      { min: 0, max: 1 },
    );
    const r = await post(url, secret, { model: 'm', stream: true, messages: [] });
    expect(r.status).toBe(200);
    const events = r.text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events).toHaveLength(1);
    expect(reply(events[0]!.slice(6)).error).toMatchObject({ message: 'prompt is too long', code: 'context_length_exceeded' });
    keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1 })]);
  });
});

describe('gateway client abort', () => {
  it('aborts the engine and leaves no request counted in flight when the client leaves mid-stream', async () => {
    let engineSawClose!: () => void;
    const closed = new Promise<void>((r) => (engineSawClose = r));
    const { url, secret, gw } = await setup((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
        const t = setInterval(() => res.write('data: {"choices":[{"delta":{"content":"b"}}]}\n\n'), 10);
        res.on('close', () => {
          clearInterval(t);
          engineSawClose();
        });
      });
    });
    const ac = new AbortController();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}` },
      body: JSON.stringify({ model: 'm', stream: true, messages: [] }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    expect(gw.inFlight('r-1')).toBe(1);
    expect(gw.load('m').inFlight).toBe(1);
    ac.abort();
    await closed;
    await sleep(50);
    expect(gw.inFlight('r-1')).toBe(0);
    expect(gw.load('m').inFlight).toBe(0);
  });
});
