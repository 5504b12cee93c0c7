import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EventList, KeyCreated, KeyView } from '@llmgw/shared';
import { adminAuth, jsonHeaders, liveServer, send, type LiveServer } from './live-server.js';

/** `PATCH /api/v1/keys/:id` and `GET /api/v1/usage?since=` on a real server with its SQLite store. */
let live: LiveServer;
beforeAll(async () => {
  live = await liveServer();
});
afterAll(async () => {
  await live.close();
});

const call = (method: string, path: string, body?: unknown) =>
  send(live.admin, { method, path, headers: { ...adminAuth, ...jsonHeaders }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
const errorOf = (body: string) => JSON.parse(body) as { error: string; code: string; field?: string };

describe('PATCH /api/v1/keys/:id', () => {
  it('changes the limits given, keeps the rest, removes one given null, records who did it, and lists the result', async () => {
    const made = JSON.parse((await call('POST', '/api/v1/keys', { name: 'webapp', rpm: 60, tpm: 1000 })).body) as KeyCreated;
    expect(made.key).toMatchObject({ rpm: 60, tpm: 1000 });
    const r = await call('PATCH', '/api/v1/keys/webapp', { tpm: 30000, priority: 'batch', rpm: null });
    expect(r.status).toBe(200);
    const changed = JSON.parse(r.body) as KeyView;
    expect(changed).toMatchObject({ id: made.key.id, name: 'webapp', tpm: 30000, priority: 'batch' });
    expect(changed.rpm).toBeUndefined();
    const listed = (JSON.parse((await call('GET', '/api/v1/keys')).body) as KeyView[]).find((k) => k.id === made.key.id);
    expect(listed).toEqual(changed);
    const events = JSON.parse((await call('GET', '/api/v1/events')).body) as EventList;
    expect(events.events.at(-1)).toMatchObject({
      reason: 'key-update',
      object: `key/${made.key.id}`,
      message: 'updated by "admin token": "webapp": tpm 30000, priority batch, rpm removed',
    });
  });

  it('refuses a field it does not know, a quota of 0, an unknown key and a revoked one, each naming what is wrong', async () => {
    const made = JSON.parse((await call('POST', '/api/v1/keys', { name: 'old' })).body) as KeyCreated;
    const typo = await call('PATCH', `/api/v1/keys/${made.key.id}`, { tpms: 5 });
    expect(typo.status).toBe(400);
    const zero = await call('PATCH', `/api/v1/keys/${made.key.id}`, { tpm: 0 });
    expect([zero.status, errorOf(zero.body).field]).toEqual([400, 'tpm']);
    const none = await call('PATCH', '/api/v1/keys/nope', { tpm: 5 });
    expect([none.status, errorOf(none.body).error]).toEqual([404, 'no key "nope" (see ctl keys list)']);
    expect((await call('DELETE', `/api/v1/keys/${made.key.id}`)).status).toBe(200);
    const revoked = await call('PATCH', `/api/v1/keys/${made.key.id}`, { tpm: 5 });
    expect([revoked.status, errorOf(revoked.body).code]).toEqual([409, 'conflict']);
  });
});

describe('GET /api/v1/usage?since=', () => {
  it('takes a duration or an ISO time, and refuses one it cannot read, one in the future and one older than the 31 days kept', async () => {
    expect([(await call('GET', '/api/v1/usage?since=30m')).status, (await call('GET', '/api/v1/usage?since=30m')).body]).toEqual([200, '[]']);
    const iso = new Date(Date.now() - 3600_000).toISOString();
    expect((await call('GET', `/api/v1/usage?since=${iso}`)).status).toBe(200);
    for (const [since, message] of [
      ['yesterday', /^since "yesterday" is not a duration or a time \(want e\.g\. 30m, 1h, 7d/],
      [new Date(Date.now() + 3600_000).toISOString(), /is in the future$/],
      ['40d', /^since 40d is more than 31 days ago: usage per minute is kept 31 days/],
    ] as const) {
      const r = await call('GET', `/api/v1/usage?since=${encodeURIComponent(since)}`);
      expect([r.status, errorOf(r.body).field]).toEqual([400, 'since']);
      expect(errorOf(r.body).error).toMatch(message);
    }
  });
});
