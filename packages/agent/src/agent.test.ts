import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from '@jest/globals';
import { pino, type Logger } from 'pino';
import { Agent } from './agent.js';
import type { MachineProbe } from './probe/index.js';

const probe = (): Promise<MachineProbe> => Promise.resolve({ memoryTotalMb: 8192, cpuCores: 2, gpus: [], fabrics: [], warnings: [] });
const runner = { converge: () => {}, statuses: () => [], onChange: () => {} };

function capture() {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      cb();
    },
  });
  const log: Logger = pino({ level: 'info' }, stream);
  return { log, lines };
}

const agents: Agent[] = [];
const servers: http.Server[] = [];
afterEach(() => {
  for (const a of agents.splice(0)) a.stop();
  for (const s of servers.splice(0)) s.close();
});

function start(server: string, log: Logger) {
  const a = new Agent(
    { server, joinToken: 't', nodeId: 'n1', labels: {}, advertiseAddr: '127.0.0.1', heartbeatIntervalS: 0.1, probeIntervalS: 10 },
    probe,
    runner,
    log,
  );
  agents.push(a);
  void a.start();
  return a;
}

describe('agent heartbeats', () => {
  it('logs an unreachable server once per outage, not once per attempt', async () => {
    const { log, lines } = capture();
    start('http://127.0.0.1:9', log);
    await new Promise((r) => setTimeout(r, 1500));
    const errors = lines.filter((l) => l.level >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toMatch(/^cannot reach the server at http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\): check --server \/ LLMGW_SERVER; retrying with backoff$/);
  });

  it('says in one line that the join token was refused, and keeps retrying', async () => {
    let calls = 0;
    const srv = http.createServer((_req, res) => {
      calls++;
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid join token' }));
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const { log, lines } = capture();
    start(`http://127.0.0.1:${(srv.address() as AddressInfo).port}`, log);
    await new Promise((r) => setTimeout(r, 1200));
    const errors = lines.filter((l) => l.level >= 50);
    expect(errors.map((e) => e.msg)).toEqual([expect.stringMatching(/rejected the join token \(401 invalid join token\): set LLMGW_JOIN_TOKEN/)]);
    expect(calls).toBeGreaterThan(1);
  });
});
