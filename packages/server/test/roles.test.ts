import Database from 'better-sqlite3';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminAuth, bearer, jsonHeaders, liveServer, send, type LiveServer } from './live-server.js';

/** Tokens with roles on a real server: what each may do on the admin API, /metrics and the dashboard. */
let live: LiveServer;
beforeAll(async () => {
  live = await liveServer();
});
afterAll(async () => {
  await live.close();
});

async function create(
  role: string,
  name = `${role}-1`,
  auth: Record<string, string> = adminAuth,
): Promise<{ status: number; secret: string; id: string; body: string }> {
  const r = await send(live.admin, { method: 'POST', path: '/api/v1/tokens', headers: { ...auth, ...jsonHeaders }, body: JSON.stringify({ name, role }) });
  const b = (r.status === 201 ? JSON.parse(r.body) : {}) as { secret?: string; token?: { id: string } };
  return { status: r.status, secret: b.secret ?? '', id: b.token?.id ?? '', body: r.body };
}

const cordon = (auth: Record<string, string>) =>
  send(live.admin, { method: 'POST', path: '/api/v1/nodes/node-a/state', headers: { ...auth, ...jsonHeaders }, body: '{"state":"cordon"}' });

describe('tokens with roles', () => {
  it('a viewer reads everything but changes nothing: 403 with one line saying what would', async () => {
    const viewer = await create('viewer');
    expect(viewer.status).toBe(201);
    for (const p of ['/api/v1/nodes', '/api/v1/replicas', '/api/v1/models', '/api/v1/keys', '/api/v1/usage', '/api/v1/tokens', '/metrics']) {
      expect([p, (await send(live.admin, { path: p, headers: bearer(viewer.secret) })).status]).toEqual([p, 200]);
    }
    const refused = await cordon(bearer(viewer.secret));
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toEqual({
      error: 'viewer token "viewer-1" may only read; POST /api/v1/nodes/node-a/state needs an admin token (ctl tokens create --role admin)',
      code: 'forbidden',
    });
    expect((await create('admin', 'escalate', bearer(viewer.secret))).status).toBe(403);
    expect((await send(live.admin, { path: '/api/v1/replicas?show_keys=true', headers: bearer(viewer.secret) })).status).toBe(403);
    expect((await send(live.admin, { path: '/api/v1/nodes', headers: adminAuth })).body).toContain('"state":"ready"');
  });

  it('a metrics token scrapes /metrics and nothing else', async () => {
    const metrics = await create('metrics');
    const scrape = await send(live.admin, { path: '/metrics', headers: bearer(metrics.secret) });
    expect(scrape.status).toBe(200);
    expect(scrape.body).toContain('llmgw_');
    const nodes = await send(live.admin, { path: '/api/v1/nodes', headers: bearer(metrics.secret) });
    expect(nodes.status).toBe(403);
    expect(JSON.parse(nodes.body)).toEqual({
      error: 'metrics token "metrics-1" may only scrape /metrics; GET /api/v1/nodes needs an admin token (ctl tokens create --role admin)',
      code: 'forbidden',
    });
    expect((await send(live.admin, { path: '/metrics' })).status).toBe(401);
  });

  it('an admin token does what the bootstrap one does; a revoked token stops at once', async () => {
    const admin = await create('admin', 'ops');
    expect((await cordon(bearer(admin.secret))).status).toBe(200);
    const revoked = await send(live.admin, { method: 'DELETE', path: `/api/v1/tokens/${admin.id}`, headers: adminAuth });
    expect(JSON.parse(revoked.body)).toMatchObject({ id: admin.id, revoked_at: expect.any(String) });
    const after = await cordon(bearer(admin.secret));
    expect([after.status, JSON.parse(after.body)]).toEqual([401, { error: 'the token was revoked', code: 'unauthenticated' }]);
    await send(live.admin, { method: 'POST', path: '/api/v1/nodes/node-a/state', headers: { ...adminAuth, ...jsonHeaders }, body: '{"state":"uncordon"}' });
  });

  it('lists tokens without secrets, stores only their hashes, and refuses an unknown role with the field', async () => {
    const t = await create('viewer', 'listed');
    const list = await send(live.admin, { path: '/api/v1/tokens', headers: adminAuth });
    expect(JSON.parse(list.body)).toContainEqual({ id: t.id, name: 'listed', role: 'viewer', prefix: t.secret.slice(0, 17), created_at: expect.any(String) });
    expect(list.body).not.toContain(t.secret);
    const db = new Database(path.join(live.dataDir, 'llmgw.db'), { readonly: true });
    const rows = JSON.stringify(db.prepare('SELECT * FROM admin_tokens').all());
    db.close();
    expect(rows).toContain('listed');
    expect(rows).not.toContain(t.secret);
    const bad = await send(live.admin, {
      method: 'POST',
      path: '/api/v1/tokens',
      headers: { ...adminAuth, ...jsonHeaders },
      body: '{"name":"x","role":"root"}',
    });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ field: 'role' });
  });
});

describe('the dashboard with a viewer token', () => {
  const form = { 'content-type': 'application/x-www-form-urlencoded' };

  it('shows the fleet without actions and refuses a cordon with a 403 page; a revoked token logs it out', async () => {
    const viewer = await create('viewer', 'dash');
    const login = await send(live.admin, { method: 'POST', path: '/login', headers: form, body: `token=${viewer.secret}` });
    expect(login.status).toBe(303);
    const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
    const page = await send(live.admin, { path: '/', headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.body).toContain('node-a');
    expect(page.body).toContain('read-only');
    expect(page.body).not.toContain('value="cordon"');
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
    const post = await send(live.admin, { method: 'POST', path: '/nodes/node-a/state', headers: { ...form, cookie }, body: `csrf=${csrf}&action=cordon` });
    expect(post.status).toBe(403);
    expect(post.body).toContain('may only read');
    expect((await send(live.admin, { path: '/nodes/node-a/drain', headers: { cookie } })).status).toBe(403);
    await send(live.admin, { method: 'DELETE', path: `/api/v1/tokens/${viewer.id}`, headers: adminAuth });
    expect((await send(live.admin, { path: '/', headers: { cookie } })).status).toBe(303);
  });

  it('a metrics token cannot log in', async () => {
    const metrics = await create('metrics', 'dash-metrics');
    const login = await send(live.admin, { method: 'POST', path: '/login', headers: form, body: `token=${metrics.secret}` });
    expect(login.status).toBe(403);
    expect(login.headers['set-cookie']).toBeUndefined();
  });
});
