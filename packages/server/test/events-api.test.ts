import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EventList } from '@llmgw/shared';
import { adminAuth, bearer, jsonHeaders, liveServer, send, type LiveServer } from './live-server.js';

/** `GET /api/v1/events` on a real server: admin actions with who made them, filters, a watch. */
let live: LiveServer;
beforeAll(async () => {
  live = await liveServer();
});
afterAll(async () => {
  await live.close();
});

async function events(query = ''): Promise<EventList> {
  const r = await send(live.admin, { path: `/api/v1/events${query}`, headers: adminAuth });
  expect([r.status, r.body]).toEqual([200, expect.any(String)]);
  return JSON.parse(r.body) as EventList;
}

const post = (path: string, body: unknown, auth: Record<string, string> = adminAuth) =>
  send(live.admin, { method: 'POST', path, headers: { ...auth, ...jsonHeaders }, body: JSON.stringify(body) });

describe('GET /api/v1/events', () => {
  it('records admin actions with the token that made them: a cordon with its reason, token and key changes', async () => {
    const token = await post('/api/v1/tokens', { name: 'ops-alice', role: 'admin' });
    const { secret, token: t } = JSON.parse(token.body) as { secret: string; token: { id: string } };
    expect((await post('/api/v1/nodes/node-a/state', { state: 'cordon', reason: 'PSU swap' }, bearer(secret))).status).toBe(200);
    // A refused action (no such node) leaves no event.
    expect((await post('/api/v1/nodes/nope/state', { state: 'cordon' }, bearer(secret))).status).toBe(404);
    // Nor does one that changes nothing: the node is cordoned already, and keeps its reason.
    expect((await post('/api/v1/nodes/node-a/state', { state: 'cordon' }, bearer(secret))).status).toBe(200);
    expect((await post('/api/v1/nodes/node-a/state', { state: 'uncordon' }, bearer(secret))).status).toBe(200);
    const list = await events();
    expect(list.events.map((e) => [e.source, e.reason, e.object, e.who, e.message])).toEqual([
      ['admin', 'key-create', expect.stringMatching(/^key\//), 'admin token', 'created by "admin token": for "k"'],
      ['admin', 'token-create', `token/${t.id}`, 'admin token', 'created by "admin token": for "ops-alice", role admin'],
      ['admin', 'cordon', 'node/node-a', 'ops-alice', 'cordoned by "ops-alice": PSU swap'],
      ['admin', 'uncordon', 'node/node-a', 'ops-alice', 'uncordoned by "ops-alice"'],
    ]);
    expect(list.cursor).toBe(list.events.at(-1)!.id);
    expect((await events('?node=node-a')).events.map((e) => e.reason)).toEqual(['cordon', 'uncordon']);
  });

  it('records revocations of keys and tokens, naming what was revoked', async () => {
    const { cursor } = await events();
    const made = JSON.parse((await post('/api/v1/tokens', { name: 'ci-bot', role: 'viewer' })).body) as { token: { id: string } };
    const key = JSON.parse((await post('/api/v1/keys', { name: 'temp' })).body) as { key: { id: string } };
    const del = (path: string) => send(live.admin, { method: 'DELETE', path, headers: adminAuth });
    expect((await del(`/api/v1/tokens/${made.token.id}`)).status).toBe(200);
    expect((await del(`/api/v1/keys/${key.key.id}`)).status).toBe(200);
    // Refused: nothing to revoke, so nothing recorded.
    expect((await del('/api/v1/keys/nope')).status).toBe(404);
    expect((await events(`?since=${cursor}`)).events.map((e) => [e.reason, e.object, e.message])).toEqual([
      ['token-create', `token/${made.token.id}`, 'created by "admin token": for "ci-bot", role viewer'],
      ['key-create', `key/${key.key.id}`, 'created by "admin token": for "temp"'],
      ['token-revoke', `token/${made.token.id}`, 'revoked by "admin token": "ci-bot"'],
      ['key-revoke', `key/${key.key.id}`, 'revoked by "admin token": "temp"'],
    ]);
  });

  it("a dashboard cordon is recorded too, with the session's token", async () => {
    const { cookie, csrf } = await live.login();
    const r = await send(live.admin, {
      method: 'POST',
      path: '/nodes/node-a/state',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${csrf}&action=cordon&reason=rack%20move`,
    });
    expect(r.status).toBe(303);
    expect((await events('?node=node-a')).events.at(-1)).toMatchObject({
      reason: 'cordon',
      who: 'admin token',
      message: 'cordoned by "admin token": rack move',
    });
    await post('/api/v1/nodes/node-a/state', { state: 'uncordon' });
  });

  it('watches: a long-poll after the cursor answers as soon as a matching event happens', async () => {
    const { cursor } = await events();
    const started = Date.now();
    const watch = events(`?since=${cursor}&wait_s=30&node=node-a`);
    await new Promise((r) => setTimeout(r, 100));
    await post('/api/v1/nodes/node-a/state', { state: 'cordon', reason: 'watch me' });
    const got = await watch;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(got.events.map((e) => e.message)).toEqual(['cordoned by "admin token": watch me']);
    expect((await events(`?since=${got.cursor}&wait_s=0`)).events).toEqual([]);
    await post('/api/v1/nodes/node-a/state', { state: 'uncordon' });
  });

  it('refuses a bad parameter with 400 naming it', async () => {
    for (const [q, field] of [
      ['?since=-1', 'since'],
      ['?wait_s=61', 'wait_s'],
      ['?limit=0', 'limit'],
      ['?node=', 'node'],
    ] as const) {
      const r = await send(live.admin, { path: `/api/v1/events${q}`, headers: adminAuth });
      expect([q, r.status, (JSON.parse(r.body) as { field?: string }).field]).toEqual([q, 400, field]);
    }
  });
});
