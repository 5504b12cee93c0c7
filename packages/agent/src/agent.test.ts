import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from '@jest/globals';
import { pino, type Logger } from 'pino';
import { NodeReportSchema, validate } from '@llmgw/shared';
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

function start(server: string, log: Logger, settings: Partial<ConstructorParameters<typeof Agent>[0]> = {}) {
  const a = new Agent(
    { server, joinToken: 't', nodeId: 'n1', labels: {}, advertiseAddr: '127.0.0.1', heartbeatIntervalMs: 100, probeIntervalMs: 10_000, ...settings },
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
    // No grace: a server that is starting is the next test.
    start('http://127.0.0.1:9', log, { serverStartGraceS: 0 });
    await new Promise((r) => setTimeout(r, 1500));
    const errors = lines.filter((l) => l.level >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toMatch(
      /^cannot reach the server at http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\): check --server \/ LLMGW_SERVER; retrying with backoff$/,
    );
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

  it('waits for a server that is starting without an error line, and joins as soon as it listens', async () => {
    const port = await freePort();
    const { log, lines } = capture();
    // A 5 s heartbeat: joining within a second of the server listening shows it did not back off.
    start(`http://127.0.0.1:${port}`, log, { heartbeatIntervalMs: 5000 });
    await new Promise((r) => setTimeout(r, 1200));
    let beats = 0;
    const srv = http.createServer((req, res) => {
      req.resume();
      if (req.url === '/agent/v1/heartbeat') beats++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/agent/v1/heartbeat' ? { node_id: 'n1' } : { node_id: 'n1', version: 1, assignments: [] }));
    });
    servers.push(srv);
    const listeningAt = Date.now();
    await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
    while (beats === 0 && Date.now() - listeningAt < 3000) await new Promise((r) => setTimeout(r, 20));
    expect(Date.now() - listeningAt).toBeLessThan(1500);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(lines.map((l) => l.msg)).toEqual([`waiting for the server at http://127.0.0.1:${port} to start (ECONNREFUSED)`, 'joined the server']);
  });

  it('reports the outage as an error once the server has refused connections for the whole grace', async () => {
    const { log, lines } = capture();
    start('http://127.0.0.1:9', log, { serverStartGraceS: 0.5 });
    await new Promise((r) => setTimeout(r, 1500));
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [30, 'waiting for the server at http://127.0.0.1:9 to start (ECONNREFUSED)'],
      [50, expect.stringMatching(/^cannot reach the server at http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\)/)],
    ]);
  });
});

describe('agent reports', () => {
  it('list the model cache as NodeReport.files, in the shared schema', async () => {
    const file = { sha256: 'ab'.repeat(32), source: 'http://files.example/m.gguf', size_bytes: 1234, last_used_ms: 1700000000000, in_use: true };
    const a = new Agent(
      {
        server: 'http://127.0.0.1:9',
        joinToken: 't',
        nodeId: 'n1',
        labels: {},
        advertiseAddr: '127.0.0.1',
        heartbeatIntervalMs: 1000,
        probeIntervalMs: 10_000,
        files: () => [file],
      },
      probe,
      runner,
      pino({ level: 'silent' }),
    );
    const report = await a.report();
    expect(report.files).toEqual([file]);
    expect(validate(NodeReportSchema, report).ok).toBe(true);
  });
});

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}
