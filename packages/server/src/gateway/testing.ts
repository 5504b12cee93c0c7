import http from 'node:http';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import type { Model } from '@llmgw/shared';
import type { CatalogView, Controller, ControllerEvents, RouteTarget } from '../controller/controller.js';
import { Gateway, type GatewaySettings } from './gateway.js';
import { KeyRing } from './keys.js';
import { Metrics } from '../metrics.js';
import { Traffic } from './traffic.js';
import { memoryStore } from '../store/testing.js';

// Shared by the gateway's test files: a gateway in process in front of a fake engine,
// and the small clients the tests speak to it with. Each test file calls `closeAll`
// after each test.

/** A fake engine: a plain node:http handler. */
export type Upstream = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const closers: (() => Promise<void>)[] = [];

/** Closes every server and gateway the last test started, newest first. */
export async function closeAll(): Promise<void> {
  for (const c of closers.splice(0).reverse()) await c();
}

export async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A gateway in front of one fake engine, with one API key. */
export async function setup(upstream: Upstream, settings: Partial<GatewaySettings> = {}, replicas = 1, scaling?: Model['scaling'], catalog?: CatalogView) {
  const engineUrl = await listen(upstream);
  const model: Model = { name: 'm', source: 'x', profiles: [{ name: 'cpu', engine: 'llama.cpp' }], ...(scaling ? { scaling } : {}) };
  // A model that scales from zero has no replica until the gateway asks for one.
  let started = !scaling || scaling.min > 0;
  const targets: RouteTarget[] = Array.from({ length: replicas }, (_, i) => ({ replicaId: `r-${i + 1}`, endpoint: engineUrl, apiKey: 'k' }));
  const lookups = { resolve: 0, suggest: 0 };
  const ctl = {
    catalogView: {
      models: [model],
      resolve: (n: string) => (lookups.resolve++, n === 'm' ? model : undefined),
      suggest: (n: string) => (lookups.suggest++, catalog?.suggest(n) ?? []),
    },
    models: [model],
    startedAtMs: Date.now(),
    routes: (name: string) => (name === 'm' && started ? targets : []),
    listReplicas: () => [],
    unheard: () => [],
    lastAttempt: () => undefined,
    engineFailed: () => {},
    notify: () => void setTimeout(() => (started = true), 20),
    events: new EventEmitter<ControllerEvents>(),
  } as unknown as Controller;
  const store = memoryStore();
  const keys = new KeyRing(store);
  const { secret } = await keys.create({ name: 'test' }, (n) => n);
  const traffic = new Traffic();
  // `gw` is made next; only a scrape reads it.
  const metrics: Metrics = new Metrics({ inFlight: () => traffic.inFlightByReplica(), queued: () => gw.queued(), saturation: () => gw.saturation() });
  const gw: Gateway = new Gateway(
    ctl,
    keys,
    metrics,
    traffic,
    {
      maxBodyBytes: 1 << 20,
      upstreamTimeoutMs: 5000,
      cooldownMs: 1000,
      keepAliveMs: 10_000,
      coldStartTimeoutMs: 1000,
      streamIdleTimeoutMs: 60_000,
      ...settings,
    },
    pino({ level: 'silent' }),
  );
  const url = await listen(gw.handle);
  closers.push(async () => {
    await keys.close();
    await gw.close();
  });
  return { url, secret, keys, store, gw, metrics, lookups, model, ctl };
}

/**
 * A gateway in front of one fake engine per replica (`r-1`, `r-2`, …), for routing
 * tests: `ready` is the set of replicas routed to, and `changed()` tells the gateway the
 * replicas changed (as the controller's `replicas` event does).
 */
export async function setupFleet(
  engines: Upstream[],
  model: Partial<Model> = {},
  settings: Partial<GatewaySettings> = {},
  /** Per replica, what its spec would give its route (its engine, its adapters in order). */
  specs: Pick<RouteTarget, 'engine' | 'adapters'>[] = [],
) {
  const m: Model = { name: 'm', source: 'x', profiles: [{ name: 'cpu', engine: 'llama.cpp' }], ...model };
  const targets: RouteTarget[] = [];
  for (const [i, e] of engines.entries()) targets.push({ replicaId: `r-${i + 1}`, endpoint: await listen(e), apiKey: 'k', ...specs[i] });
  const ready = new Set(targets.map((t) => t.replicaId));
  const events = new EventEmitter<ControllerEvents>();
  const ctl = {
    catalogView: {
      models: [m],
      resolve: (n: string) => (n === 'm' ? m : undefined),
      suggest: () => [],
      adapter: (n: string) => {
        const adapter = m.adapters?.find((a) => a.name === n);
        return adapter && { model: m, adapter };
      },
    },
    models: [m],
    startedAtMs: Date.now(),
    routes: (name: string) => (name === 'm' ? targets.filter((t) => ready.has(t.replicaId)) : []),
    listReplicas: () => targets.map((t) => ({ id: t.replicaId, model: 'm', state: ready.has(t.replicaId) ? 'ready' : 'stopped', endpoint: t.endpoint })),
    unheard: () => [],
    lastAttempt: () => undefined,
    engineFailed: () => {},
    notify: () => {},
    events,
  } as unknown as Controller;
  const keys = new KeyRing(memoryStore());
  const { secret } = await keys.create({ name: 'test' }, (n) => n);
  const traffic = new Traffic();
  // `gw` is made next; only a scrape reads it.
  const metrics: Metrics = new Metrics({ inFlight: () => traffic.inFlightByReplica(), queued: () => gw.queued(), saturation: () => gw.saturation() });
  const gw: Gateway = new Gateway(
    ctl,
    keys,
    metrics,
    traffic,
    {
      maxBodyBytes: 1 << 22,
      upstreamTimeoutMs: 5000,
      cooldownMs: 60_000,
      keepAliveMs: 10_000,
      coldStartTimeoutMs: 1000,
      streamIdleTimeoutMs: 60_000,
      ...settings,
    },
    pino({ level: 'silent' }),
  );
  const url = await listen(gw.handle);
  closers.push(async () => {
    await keys.close();
    await gw.close();
  });
  return { url, secret, keys, gw, metrics, ready, changed: () => events.emit('replicas') };
}

export async function post(url: string, secret: string, body: unknown): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const headers: http.IncomingHttpHeaders = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  return { status: res.status, text: await res.text(), headers };
}

/** The JSON an answer carries: a completion, or an OpenAI-style error. */
export type Reply = { id: string; error: { code: string; message: string; param: string | null } };
export const reply = (text: string) => JSON.parse(text) as Reply;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes each piece as its own TCP write, a little apart, so they arrive as separate chunks. */
export function sse(pieces: (string | Buffer)[]): Upstream {
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

/** An engine that answers every request with one JSON body. */
export function json(status: number, body: string): Upstream {
  return (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
  };
}

/** Starts a streamed chat request the test can abandon: `abort()` is the client leaving. */
export async function openStream(url: string, secret: string): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; abort: () => void }> {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}` },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    signal: ac.signal,
  });
  return { reader: res.body!.getReader(), abort: () => ac.abort() };
}
