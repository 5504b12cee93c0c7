import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EventList, NodeView } from '@llmgw/shared';
import { adminAuth, bearer, heartbeat, JOIN, jsonHeaders, liveServer, nodeAuth, send, type LiveServer } from './live-server.js';

/**
 * Issue 27, finding 8: a copy of node-a's credential used from another machine (its own
 * mgmt_addr and hostname) while the real agent keeps heartbeating. Each report overwrote
 * the other's and the gateway followed the last one, unnoticed.
 */
let plain: LiveServer;
let bound: LiveServer;
beforeAll(async () => {
  plain = await liveServer();
  bound = await liveServer({}, { bindCredentials: true });
});
afterAll(async () => {
  await plain.close();
  await bound.close();
});

const REAL = { mgmt_addr: '127.0.0.1', hostname: 'node-a' };
const COPY = { mgmt_addr: '127.0.0.2', hostname: 'attacker' };

const beat = (server: LiveServer, as: Record<string, string>) =>
  send(server.admin, {
    method: 'POST',
    path: '/agent/v1/heartbeat',
    headers: { ...nodeAuth, 'content-type': 'application/json' },
    body: JSON.stringify(heartbeat('node-a', as)),
  });

async function nodeA(server: LiveServer): Promise<NodeView | undefined> {
  return (JSON.parse((await send(server.admin, { path: '/api/v1/nodes', headers: adminAuth })).body) as NodeView[]).find((n) => n.id === 'node-a');
}

async function credentialEvents(server: LiveServer): Promise<EventList['events']> {
  const r = await send(server.admin, { path: '/api/v1/events?node=node-a', headers: adminAuth });
  return (JSON.parse(r.body) as EventList).events.filter((e) => e.reason.startsWith('credential-'));
}

describe('a node credential heard from two places at once', () => {
  it('marks the node suspect and records one credential-conflict event', async () => {
    expect((await nodeA(plain))?.suspect).toBeUndefined();
    for (const as of [REAL, COPY, REAL, COPY, REAL]) expect((await beat(plain, as)).status).toBe(200);
    const n = await nodeA(plain);
    expect(n?.suspect).toContain('node credential of node-a heard from');
    expect(n?.suspect).toContain('hostname attacker');
    const events = await credentialEvents(plain);
    expect(events.map((e) => [e.type, e.reason, e.object])).toEqual([['Warning', 'credential-conflict', 'node/node-a']]);
  });

  it('with --bind-credentials, refuses the second place (403) and keeps the first one’s address', async () => {
    expect((await beat(bound, REAL)).status).toBe(200);
    const r = await beat(bound, COPY);
    expect(r.status).toBe(403);
    const body = JSON.parse(r.body) as { error: string; code: string };
    expect(body.code).toBe('forbidden');
    expect(body.error).toContain('--bind-credentials');
    const n = await nodeA(bound);
    expect(n?.mgmt_addr).toBe('127.0.0.1');
    expect(n?.hostname).toBe('node-a');
    expect(n?.suspect).toContain('refused (--bind-credentials)');
    expect((await beat(bound, COPY)).status).toBe(403);
    expect((await beat(bound, REAL)).status).toBe(200);
    expect((await credentialEvents(bound)).map((e) => e.reason)).toEqual(['credential-refused']);
  });

  it('forgets the places of a deleted node: the agent that joins again from elsewhere is taken at once (review of issue 27)', async () => {
    const server = await liveServer({}, { bindCredentials: true });
    try {
      expect((await beat(server, REAL)).status).toBe(200);
      // The documented way to revoke a stolen credential: delete the node, the real agent joins again.
      expect((await send(server.admin, { method: 'DELETE', path: '/api/v1/nodes/node-a?force=true', headers: adminAuth })).status).toBe(200);
      const joined = await send(server.admin, {
        method: 'POST',
        path: '/agent/v1/join',
        headers: { ...bearer(JOIN), ...jsonHeaders },
        body: JSON.stringify({ node_id: 'node-a' }),
      });
      expect(joined.status).toBe(200);
      const { credential } = JSON.parse(joined.body) as { credential: string };
      const again = await send(server.admin, {
        method: 'POST',
        path: '/agent/v1/heartbeat',
        headers: { ...bearer(credential), ...jsonHeaders },
        body: JSON.stringify(heartbeat('node-a', COPY)),
      });
      expect([again.status, again.body]).toEqual([200, expect.any(String)]);
      expect((await nodeA(server))?.suspect).toBeUndefined();
    } finally {
      await server.close();
    }
  });
});
