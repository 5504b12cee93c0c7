import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminAuth, heartbeat, liveServer, nodeAuth, send, type LiveServer } from './live-server.js';

/** A report whose mgmt_addr is more than an address would put client traffic elsewhere: refused whole. */
let live: LiveServer;
beforeAll(async () => {
  live = await liveServer();
});
afterAll(async () => {
  await live.close();
});

describe('mgmt_addr from an agent', () => {
  it.each(['http://evil.example', 'evil.example:443', 'evil.example/v1', 'a@evil.example'])(
    '%s gets 400 naming the field, and the node keeps its address',
    async (addr) => {
      const r = await send(live.admin, {
        method: 'POST',
        path: '/agent/v1/heartbeat',
        headers: { ...nodeAuth, 'content-type': 'application/json' },
        body: JSON.stringify(heartbeat('node-a', { mgmt_addr: addr })),
      });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toEqual({
        error: 'report.mgmt_addr must be an IP address or a host name, without scheme, port or path (e.g. 10.0.0.5, fd00::5 or gpu-1.lan)',
        code: 'invalid_request',
        field: 'report.mgmt_addr',
      });
      const nodes = JSON.parse((await send(live.admin, { path: '/api/v1/nodes', headers: adminAuth })).body) as { id: string; mgmt_addr?: string }[];
      expect(nodes.find((n) => n.id === 'node-a')?.mgmt_addr).toBe('127.0.0.1');
    },
  );
});
