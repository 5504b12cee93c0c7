import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { StatusViewSchema, validate, type StatusView } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import { adminErrors } from '../http/http.js';
import { soloStatus, statusApi } from './status-api.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');

describe('soloStatus', () => {
  it.each([
    {
      what: 'everything given: one instance, its own leader since it started, epoch 0, seen now',
      given: {
        id: 'solo',
        startedAtMs: T0,
        adminUrl: 'https://127.0.0.1:8081',
        clientUrl: 'http://127.0.0.1:8080',
        version: '1.2.0',
        catalog: { digest: 'abc', models: 2 },
        nowMs: T0 + 3_600_000,
      },
      instance: { admin_url: 'https://127.0.0.1:8081', client_url: 'http://127.0.0.1:8080', version: '1.2.0', catalog: { digest: 'abc', models: 2 } },
    },
    {
      what: 'no URLs, version or catalog: those fields are absent, not empty',
      given: { id: 'solo', startedAtMs: T0, nowMs: T0 },
      instance: {},
    },
    {
      what: 'a failed reload is shown with the catalog still in force',
      given: { id: 'solo', startedAtMs: T0, catalog: { digest: 'abc', models: 2, error: 'models[0].name: is missing' }, nowMs: T0 },
      instance: { catalog: { digest: 'abc', models: 2, error: 'models[0].name: is missing' } },
    },
  ])('$what', ({ given, instance }) => {
    const v = soloStatus(given);
    expect(v).toEqual({
      store: 'sqlite',
      instance: 'solo',
      leader: { instance: 'solo', epoch: 0, since: '2026-03-01T12:00:00.000Z' },
      instances: [{ id: 'solo', started: '2026-03-01T12:00:00.000Z', last_seen_s: 0, leader: true, self: true, ...instance }],
    });
    expect(validate(StatusViewSchema, v, '').ok).toBe(true);
  });
});

describe('GET /api/v1/status on a real HTTP server', () => {
  let view: StatusView | Error = soloStatus({ id: 'solo', startedAtMs: T0, nowMs: T0 });
  const app = express();
  app.use('/api/v1', statusApi({ status: () => (view instanceof Error ? Promise.reject(view) : Promise.resolve(view)) }));
  app.use(adminErrors);
  const srv = http.createServer(app);
  let base = '';
  beforeAll(async () => {
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/api/v1/status`;
  });
  afterAll(async () => {
    await new Promise((r) => srv.close(r));
  });

  it("answers the source's view as JSON", async () => {
    const r = await fetch(base);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(view);
  });

  it('answers any other method 405 with Allow', async () => {
    const r = await fetch(base, { method: 'POST' });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD');
  });

  it("answers a source's failure with its code's status and message", async () => {
    view = new DomainError('store_unavailable', 'the database does not answer');
    const r = await fetch(base);
    expect({ status: r.status, body: (await r.json()) as unknown }).toEqual({
      status: 503,
      body: { error: 'the database does not answer', code: 'store_unavailable' },
    });
  });
});
