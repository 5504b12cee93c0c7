import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { nodeAuth, seedCredential } from './credentials.js';
import { makeServerSettings } from './live-server.js';
import { makeModel, makeReport } from './factories.js';
import { startServer, type RunningServer } from '../src/server.js';
import { FaultyStore } from '../src/store/faulty.js';
import { SqliteStore } from '../src/store/sqlite.js';

/**
 * The real server over HTTP on a store that fails on demand: a full disk (ENOSPC),
 * then a failing one (EIO), then room again. Writes answer 503, reads and the gateway
 * keep serving, /healthz says degraded on both listeners, and once the store takes
 * writes again every request's usage is in it, none lost and none twice.
 */
const model = makeModel({ name: 'm' });
const catalog = { models: [model], resolve: (n: string) => (n === 'm' ? model : undefined), suggest: () => [] };
const ADMIN = { authorization: 'Bearer admin', 'content-type': 'application/json' };
const NODE = { ...nodeAuth, 'content-type': 'application/json' };
const USAGE = { prompt_tokens: 3, completion_tokens: 2 };

let dir: string;
let store: FaultyStore;
let server: RunningServer;
let engine: http.Server;
let secret: string;
let served = 0;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (await ok()) return;
  throw new Error(`timed out waiting for ${what}`);
}
const api = (p: string, init: RequestInit = {}) => fetch(`${server.adminUrl}${p}`, { ...init, headers: { ...ADMIN, ...(init.headers as object) } });
const heartbeat = (shards: unknown[] = []) =>
  fetch(`${server.adminUrl}/agent/v1/heartbeat`, {
    method: 'POST',
    headers: NODE,
    body: JSON.stringify({ report: makeReport({ node_id: 'n1', mgmt_addr: '127.0.0.1' }), shards }),
  });
async function complete(): Promise<number> {
  const res = await fetch(`${server.clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  if (res.status === 200) served++;
  return res.status;
}
const health = async (url: string) => (await fetch(`${url}/healthz`)).json() as Promise<{ status: string; reason?: string }>;
const storedUsage = async () => (await store.inner.loadUsage()).filter((u) => u.model === 'm');

beforeAll(async () => {
  engine = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' } }], usage: USAGE }));
    });
  });
  await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-faults-'));
  store = new FaultyStore(new SqliteStore(dir));
  await seedCredential(store, 'n1');
  server = await startServer(
    makeServerSettings(dir, {
      notReadyAfterMs: 60_000,
      lostAfterMs: 600_000,
      reconcileIntervalMs: 200,
      upstreamTimeoutMs: 10_000,
      keepAliveMs: 5000,
      drainTimeoutMs: 10_000,
      coldStartTimeoutMs: 5000,
    }),
    catalog,
    pino({ level: 'silent' }),
    { store },
  );
  // One node, one replica of m placed on it, its engine reported ready.
  expect((await heartbeat()).status).toBe(200);
  let replica: { id: string; shards: { id: string }[] } | undefined;
  await until('a replica placed', async () => {
    replica = ((await (await api('/api/v1/replicas')).json()) as (typeof replica)[])[0];
    return replica !== undefined;
  });
  const port = (engine.address() as AddressInfo).port;
  expect((await heartbeat([{ id: replica!.shards[0]!.id, replica_id: replica!.id, state: 'ready', port }])).status).toBe(200);
  const created = await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'app' }) });
  expect(created.status).toBe(201);
  secret = ((await created.json()) as { secret: string }).secret;
  await until('the replica routable', async () => (await complete()) === 200);
});

afterAll(async () => {
  await server?.close();
  await new Promise((r) => engine?.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a store that fails', () => {
  it('answers writes with 503 and keeps serving reads and clients, then recovers with every request counted', async () => {
    for (let i = 0; i < 5; i++) expect(await complete()).toBe(200);
    expect(await server.keys.flushUsage()).toBe(true);

    store.fault = 'ENOSPC';
    // Writes: 503 with the reason, memory unchanged.
    const key = await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'second' }) });
    expect([key.status, await key.json()]).toEqual([503, { error: 'store unavailable: ENOSPC: no space left on device, write', code: 'store_unavailable' }]);
    const cordon = await api('/api/v1/nodes/n1/state', { method: 'POST', body: JSON.stringify({ state: 'cordon', reason: 'x' }) });
    expect(cordon.status).toBe(503);
    expect((await (await fetch(`${server.adminUrl}/api/v1/keys/app`, { method: 'DELETE', headers: ADMIN })).json()) as object).toEqual({
      error: expect.stringMatching(/^store unavailable: ENOSPC/),
      code: 'store_unavailable',
    });
    // Reads and the gateway keep working, from memory.
    const nodes = (await (await api('/api/v1/nodes')).json()) as { id: string; state: string }[];
    expect(nodes.map((n) => [n.id, n.state])).toEqual([['n1', 'ready']]);
    expect(((await (await api('/api/v1/keys')).json()) as { name: string; revoked_at?: string }[]).map((k) => [k.name, k.revoked_at])).toEqual([
      ['app', undefined],
    ]);
    for (let i = 0; i < 7; i++) expect(await complete()).toBe(200);
    expect((await heartbeat()).status).toBe(200);
    expect(await server.keys.flushUsage()).toBe(false);
    for (const url of [server.adminUrl, server.clientUrl]) {
      expect(await health(url)).toEqual({ status: 'degraded', reason: 'store unavailable: ENOSPC: no space left on device, write', since: expect.any(String) });
    }
    const metrics = await (await api('/metrics')).text();
    expect(metrics).toMatch(/^llmgw_store_up 0$/m);
    expect(metrics).toMatch(/^llmgw_store_errors_total\{op="addUsage"\} [1-9]/m);

    // A failing disk: reads of the store fail too, the API still answers from memory.
    store.fault = 'EIO';
    for (let i = 0; i < 3; i++) expect(await complete()).toBe(200);
    expect(await server.keys.flushUsage()).toBe(false);
    const usage = await api('/api/v1/usage');
    expect(usage.status).toBe(200);
    expect(((await usage.json()) as { key_name: string; requests: number }[]).find((u) => u.key_name === 'app')?.requests).toBe(served);
    expect((await health(server.clientUrl)).reason).toBe('store unavailable: EIO: i/o error, read');
    expect(await storedUsage()).toEqual([expect.objectContaining({ requests: served - 10 })]);

    // Room again: the next flush or probe succeeds, no restart.
    store.fault = undefined;
    await until('healthy again', async () => (await health(server.adminUrl)).status === 'ok');
    await until('usage written', async () => (await storedUsage())[0]?.requests === served);
    expect(await storedUsage()).toEqual([
      expect.objectContaining({
        keyName: 'app',
        requests: served,
        errors: 0,
        promptTokens: served * USAGE.prompt_tokens,
        completionTokens: served * USAGE.completion_tokens,
      }),
    ]);
    expect(await health(server.clientUrl)).toEqual({ status: 'ok' });
    expect(await (await api('/metrics')).text()).toMatch(/^llmgw_store_up 1$/m);
    expect((await api('/api/v1/nodes/n1/state', { method: 'POST', body: JSON.stringify({ state: 'cordon', reason: 'x' }) })).status).toBe(200);
    expect((await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'second' }) })).status).toBe(201);
    expect((await store.inner.loadNodes()).map((n) => [n.id, n.admin.state])).toEqual([['n1', 'cordoned']]);
    console.log(
      `store faults (ENOSPC, then EIO): 3 admin writes answered 503 store_unavailable, 10 client requests and 1 heartbeat served 200 while failing, ` +
        `${store.writes.failed} store writes refused, 0 crashes; after recovery the store holds ${(await storedUsage())[0]?.requests} requests of ${served} served`,
    );
  });
});
