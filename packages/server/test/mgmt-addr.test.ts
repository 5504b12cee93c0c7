import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminAuth, heartbeat, liveServer, nodeAuth, send, type LiveServer } from './live-server.js';

/** A report whose mgmt_addr is more than an address would put client traffic elsewhere: refused whole. */
let live: LiveServer;
/** A fleet server: no --allow-loopback-nodes. */
let fleet: LiveServer;
beforeAll(async () => {
  live = await liveServer();
  fleet = await liveServer({}, { allowLoopbackNodes: false });
});
afterAll(async () => {
  await live.close();
  await fleet.close();
});

const beat = (server: LiveServer, addr: string) =>
  send(server.admin, {
    method: 'POST',
    path: '/agent/v1/heartbeat',
    headers: { ...nodeAuth, 'content-type': 'application/json' },
    body: JSON.stringify(heartbeat('node-a', { mgmt_addr: addr })),
  });

async function addressOf(server: LiveServer): Promise<string | undefined> {
  const nodes = JSON.parse((await send(server.admin, { path: '/api/v1/nodes', headers: adminAuth })).body) as { id: string; mgmt_addr?: string }[];
  return nodes.find((n) => n.id === 'node-a')?.mgmt_addr;
}

describe('mgmt_addr from an agent', () => {
  it.each(['http://evil.example', 'evil.example:443', 'evil.example/v1', 'a@evil.example'])(
    '%s gets 400 naming the field, and the node keeps its address',
    async (addr) => {
      const r = await beat(live, addr);
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toEqual({
        error: 'report.mgmt_addr must be an IP address or a host name, without scheme, port or path (e.g. 10.0.0.5, fd00::5 or gpu-1.lan)',
        code: 'invalid_request',
        field: 'report.mgmt_addr',
      });
      expect(await addressOf(live)).toBe('127.0.0.1');
    },
  );

  // Issue 27, finding 7: each was taken, and the gateway would have POSTed prompts there.
  it.each([
    ['169.254.169.254', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['2130706433', 'a number'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
  ])('%s is refused (%s) even with --allow-loopback-nodes, and the node keeps its address', async (addr, why) => {
    for (const server of [live, fleet]) {
      const r = await beat(server, addr);
      expect(r.status).toBe(400);
      const body = JSON.parse(r.body) as { error: string; field: string };
      expect(body.field).toBe('report.mgmt_addr');
      expect(body.error).toContain(`report.mgmt_addr ${addr} `);
      expect(body.error).toContain(why);
    }
    expect(await addressOf(live)).toBe('127.0.0.1');
    expect(await addressOf(fleet)).toBe('node-a.invalid');
  });

  it('loopback is refused without --allow-loopback-nodes, saying how to allow it, and taken with it', async () => {
    for (const addr of ['127.0.0.1', '::1', 'localhost']) {
      const r = await beat(fleet, addr);
      expect(r.status).toBe(400);
      expect((JSON.parse(r.body) as { error: string }).error).toContain('start the server with --allow-loopback-nodes');
    }
    expect(await addressOf(fleet)).toBe('node-a.invalid');
    expect((await beat(live, '::1')).status).toBe(200);
    expect(await addressOf(live)).toBe('::1');
    expect((await beat(live, '127.0.0.1')).status).toBe(200);
  });

  it('a unicast address or a host name is taken by a fleet server', async () => {
    for (const addr of ['10.0.0.5', 'fd00::5', 'gpu-1.invalid']) {
      expect((await beat(fleet, addr)).status).toBe(200);
      expect(await addressOf(fleet)).toBe(addr);
    }
    expect((await beat(fleet, 'node-a.invalid')).status).toBe(200);
  });
});
