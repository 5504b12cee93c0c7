import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminAuth, liveServer, send, type LiveServer } from './live-server.js';

/** `POST /api/v1/nodes/:id/state` repeated, and `GET /api/v1/version`, on a real server. */
let live: LiveServer;
beforeAll(async () => {
  live = await liveServer();
});
afterAll(async () => {
  await live.close();
});

const state = async (body: Record<string, unknown>) => {
  const r = await send(live.admin, {
    method: 'POST',
    path: '/api/v1/nodes/node-a/state',
    headers: { ...adminAuth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: JSON.parse(r.body) as unknown };
};
const nodeA = async () =>
  (JSON.parse((await send(live.admin, { path: '/api/v1/nodes', headers: adminAuth })).body) as { id: string; state: string; state_reason?: string }[]).find(
    (n) => n.id === 'node-a',
  );

describe('node state, asked for again', () => {
  it('a second cordon without a reason keeps the first one and says the node was already cordoned', async () => {
    expect(await state({ state: 'cordon', reason: 'PSU swap' })).toEqual({ status: 200, body: { id: 'node-a', state: 'cordoned', reason: 'PSU swap' } });
    expect(await state({ state: 'cordon' })).toEqual({ status: 200, body: { id: 'node-a', state: 'cordoned', reason: 'PSU swap', already: true } });
    expect(await nodeA()).toMatchObject({ state: 'cordoned', state_reason: 'PSU swap' });
    expect(await state({ state: 'cordon', reason: 'fan' })).toEqual({ status: 200, body: { id: 'node-a', state: 'cordoned', reason: 'fan', already: true } });
    expect(await state({ state: 'uncordon' })).toEqual({ status: 200, body: { id: 'node-a', state: 'ready' } });
    expect((await nodeA())?.state_reason).toBeUndefined();
  });
});

describe('GET /api/v1/version', () => {
  it("answers the server package's version and its Node.js, to any admin-API reader", async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    const r = await send(live.admin, { path: '/api/v1/version', headers: adminAuth });
    expect([r.status, JSON.parse(r.body)]).toEqual([200, { version: pkg.version, node: process.version }]);
    expect((await send(live.admin, { path: '/api/v1/version' })).status).toBe(401);
  });
});
