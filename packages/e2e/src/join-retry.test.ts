import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NodeView } from '@llmgw/shared';
import { JOIN_TOKEN, adminFetch, cleanup, ctlJson, removeTmp, startAgent, startServer } from './harness.js';

/**
 * Journey (issue 28): a join whose reply was lost, retried with the same node id and join
 * id, is the same join: it succeeds with a fresh credential that replaces the one never
 * received, so the node has one credential that works; any other join of the id is 409.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('a retried join', () => {
  it('succeeds with the same join id, leaves one live credential, and still refuses another join of the id', async () => {
    const server = await startServer();
    const join = (body: Record<string, string>) =>
      adminFetch(`${server.adminUrl}/agent/v1/join`, {
        method: 'POST',
        headers: { authorization: `Bearer ${JOIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const beat = (credential: string) =>
      adminFetch(`${server.adminUrl}/agent/v1/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          report: { node_id: 'n-retry', hostname: 'n-retry', mgmt_addr: '127.0.0.1', agent_version: 'test', labels: {}, gpus: [], fabrics: [] },
          shards: [],
          seq: 1,
        }),
      });
    const joinId = 'retry-join-id-0123456789';
    const first = await join({ node_id: 'n-retry', join_id: joinId });
    expect(first.status).toBe(200);
    const lost = ((await first.json()) as { credential: string }).credential;
    // The reply never reached the agent: it sends the same join again.
    const again = await join({ node_id: 'n-retry', join_id: joinId });
    expect(again.status).toBe(200);
    const kept = ((await again.json()) as { credential: string }).credential;
    expect(kept).not.toBe(lost);
    expect((await beat(kept)).status).toBe(200);
    expect((await beat(lost)).status).toBe(401);
    // Another machine (another join id, or none) cannot take the name.
    expect((await join({ node_id: 'n-retry', join_id: 'another-join-id-0123456' })).status).toBe(409);
    expect((await join({ node_id: 'n-retry' })).status).toBe(409);
    expect((await ctlJson<NodeView[]>(server.adminUrl, ['nodes'])).map((n) => n.id)).toEqual(['n-retry']);
  });

  it('an agent that joins saves no pending join id once it holds its credential', async () => {
    const server = await startServer();
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-j' });
    await agent.waitFor(/joined the server/);
    expect(fs.existsSync(path.join(agent.stateDir, 'node-credential.json'))).toBe(true);
    expect(fs.existsSync(path.join(agent.stateDir, 'node-join.json'))).toBe(false);
  });
});
