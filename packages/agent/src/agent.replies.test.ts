import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { HeartbeatReply, ShardAssignment } from '@llmgw/shared';
import { Agent } from './agent.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function assignment(id: string): ShardAssignment {
  return {
    id,
    replica_id: id.replace(/-0$/, ''),
    model: 'm',
    profile: 'cpu',
    engine: 'llama.cpp',
    source: 'x',
    rank: 0,
    shards: 1,
    gpus: [],
    gpu_indices: [],
    args: [],
    env: {},
    api_key: 'k',
  } as ShardAssignment;
}

const reply = (version: number, ids: string[]): HeartbeatReply => ({ node_id: 'n1', version, assignments: ids.map(assignment) });

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('Agent', () => {
  it('does not go back to older assignments when a slow heartbeat reply arrives after a newer long-poll reply', async () => {
    // The server's view: version 10 runs shard a-0; version 11 (after a drain, say) runs none.
    let heartbeats = 0;
    let releasePoll!: () => void;
    const pollReleased = new Promise<void>((r) => (releasePoll = r));
    let polls = 0;
    const server = http.createServer((req, res) => {
      const send = (body: HeartbeatReply) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      req.resume();
      req.on('end', async () => {
        if (req.url!.startsWith('/agent/v1/heartbeat')) {
          heartbeats++;
          if (heartbeats === 1) return send(reply(10, ['a-0']));
          // Computed before the change, delivered after the long-poll's answer.
          const stale = reply(10, ['a-0']);
          await pollReleased;
          await sleep(100);
          return send(stale);
        }
        polls++;
        if (polls === 1) {
          await pollReleased;
          return send(reply(11, []));
        }
        // Later polls: nothing new; they are held until the test ends.
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    });

    const converged: string[][] = [];
    let onChange: () => void = () => {};
    const agent = new Agent(
      {
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        joinToken: 't',
        nodeId: 'n1',
        labels: {},
        advertiseAddr: '127.0.0.1',
        heartbeatIntervalS: 60,
        probeIntervalS: 60,
      },
      async () => ({ cpuCores: 1, gpus: [], fabrics: [], warnings: [] }),
      {
        converge: (a) => converged.push(a.map((x) => x.id)),
        statuses: () => [],
        onChange: (l) => (onChange = l),
      },
      pino({ level: 'silent' }),
    );
    cleanups.push(() => agent.stop());
    await agent.start();
    expect(converged).toEqual([['a-0']]);
    // A shard status change sends a heartbeat, whose reply the server is slow to deliver...
    onChange();
    await sleep(50);
    expect(heartbeats).toBe(2);
    // ...and meanwhile the long-poll delivers the newer assignments.
    releasePoll();
    await sleep(400);
    expect(converged[1]).toEqual([]);
    // The stale heartbeat reply must not start the removed shard again.
    expect(converged).toEqual([['a-0'], []]);
  });
});
