import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { AssignmentsReply, HeartbeatReply, ShardAssignment, ShardStatus } from '@llmgw/shared';
import { Agent, type AgentSettings } from './agent.js';
import { shardAssignment } from './testing.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const assignment = (id: string): ShardAssignment => shardAssignment(id);

const reply = (version: number, ids: string[]): AssignmentsReply => ({ node_id: 'n1', version, assignments: ids.map(assignment) });
const ack: HeartbeatReply = { node_id: 'n1' };

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Listens on a free port of 127.0.0.1 until the test ends; the server's URL. */
async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Node n1's settings against the test server at `url`: timers that wait unless `over` says otherwise. */
const settingsFor = (url: string, over: Partial<AgentSettings> = {}): AgentSettings => ({
  server: url,
  joinToken: 't',
  nodeId: 'n1',
  labels: {},
  advertiseAddr: '127.0.0.1',
  heartbeatIntervalMs: 60_000,
  probeIntervalMs: 60_000,
  ...over,
});
const noGpus = () => Promise.resolve({ cpuCores: 1, gpus: [], fabrics: [], warnings: [] });

describe('Agent', () => {
  it('does not go back to older assignments when a slow heartbeat reply arrives after a newer long-poll reply', async () => {
    // The server's view: version 10 runs shard a-0; version 11 (after a drain, say) runs none.
    let heartbeats = 0;
    let releasePoll!: () => void;
    const pollReleased = new Promise<void>((r) => (releasePoll = r));
    let polls = 0;
    const server = http.createServer((req, res) => {
      const send = (body: AssignmentsReply | HeartbeatReply) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      req.resume();
      const answer = async (): Promise<void> => {
        if (req.url!.startsWith('/agent/v1/heartbeat')) {
          heartbeats++;
          if (heartbeats === 1) return send(ack);
          // Sent before the change, delivered after the long-poll's answer.
          await pollReleased;
          await sleep(100);
          return send(ack);
        }
        polls++;
        // The first long-poll after a start answers at once with the current assignments.
        if (polls === 1) return send(reply(10, ['a-0']));
        if (polls === 2) {
          await pollReleased;
          return send(reply(11, []));
        }
        // Later polls: nothing new; they are held until the test ends.
      };
      req.on('end', () => void answer());
    });
    const url = await listen(server);

    const converged: string[][] = [];
    let onChange: () => void = () => {};
    const agent = new Agent(
      settingsFor(url),
      noGpus,
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
    // The late heartbeat reply must not start the removed shard again.
    expect(converged).toEqual([['a-0'], []]);
  });
});

describe('Agent: one channel for assignments', () => {
  it('converges from the long-poll only, asking first with a version no server hands out, and sizes what a heartbeat reply asks for', async () => {
    const afters: string[] = [];
    const reports: { estimated_sources?: string[] }[] = [];
    let polls = 0;
    const server = http.createServer((req, res) => {
      const send = (body: unknown) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      let raw = '';
      req.on('data', (c: Buffer) => (raw += String(c)));
      req.on('end', () => {
        if (req.url!.startsWith('/agent/v1/heartbeat')) {
          reports.push((JSON.parse(raw) as { report: { estimated_sources?: string[] } }).report);
          // Assignments in a heartbeat reply (as an older server sent them) are not acted on.
          return send({ node_id: 'n1', estimate_sources: ['s.gguf'], version: 99, assignments: [assignment('old-0')] });
        }
        afters.push(new URL(req.url!, 'http://x').searchParams.get('after') ?? '');
        if (++polls === 1) return send(reply(5, ['b-0']));
        // Later polls: nothing new; they are held until the test ends.
      });
    });
    const url = await listen(server);
    const converged: string[][] = [];
    const agent = new Agent(
      settingsFor(url),
      noGpus,
      { converge: (a) => converged.push(a.map((x) => x.id)), statuses: () => [], onChange: () => {} },
      pino({ level: 'silent' }),
      (source) => Promise.resolve({ source, memory_mb: 1, weights_mb: 1, kv_cache_mb: 0, context_length: 1 }),
    );
    cleanups.push(() => agent.stop());
    await agent.start();
    expect(converged).toEqual([['b-0']]);
    expect(afters[0]).toBe('-1');
    await sleep(200);
    expect(afters[1]).toBe('5');
    expect(reports.map((r) => r.estimated_sources)).toEqual([[], ['s.gguf']]);
    expect(converged).toEqual([['b-0']]);
  });
});

describe('Agent: replies are checked before they are acted on', () => {
  /** A server whose replies the test scripts: each poll takes the next one, the last repeats. */
  async function serverSending(polls: unknown[], heartbeat: unknown) {
    let n = 0;
    const reports: { allow_command_engine?: boolean }[] = [];
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += String(c)));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.url!.startsWith('/agent/v1/heartbeat')) {
          reports.push((JSON.parse(raw) as { report: { allow_command_engine?: boolean } }).report);
          return res.end(JSON.stringify(heartbeat));
        }
        const body = polls[Math.min(n++, polls.length - 1)];
        res.end(JSON.stringify(body));
      });
    });
    const url = await listen(server);
    return { url, reports, polls: () => n };
  }

  function agentFor(url: string, lines: string[], converged: string[][], estimated: string[] = []) {
    const log = pino({ level: 'error' }, { write: (l: string) => void lines.push((JSON.parse(l) as { msg: string }).msg) });
    const agent = new Agent(
      settingsFor(url, { heartbeatIntervalMs: 50 }),
      noGpus,
      { converge: (a) => converged.push(a.map((x) => x.id)), statuses: () => [], onChange: () => {} },
      log,
      (source) => {
        estimated.push(source);
        return Promise.resolve(undefined);
      },
    );
    cleanups.push(() => agent.stop());
    return agent;
  }

  it('ignores an assignments reply that breaks the schema, logs its field once, and converges on the next good one', async () => {
    const bad = { node_id: 'n1', version: 3, assignments: [{ ...assignment('evil-0'), command: 'rm -rf /' }] };
    const srv = await serverSending([bad, bad, bad, reply(4, ['good-0'])], ack);
    const lines: string[] = [];
    const converged: string[][] = [];
    await agentFor(srv.url, lines, converged).start();
    expect(converged).toEqual([]);
    // Bad polls are retried after a pause (1 s), like failed ones; the fourth is good.
    for (let i = 0; i < 60 && converged.length === 0; i++) await sleep(100);
    expect(srv.polls()).toBeGreaterThanOrEqual(4);
    expect(converged).toEqual([['good-0']]);
    const bads = lines.filter((l) => l.includes('assignments reply'));
    expect(bads).toEqual([
      `ignored a bad assignments reply from ${srv.url}: assignments[0].command must be array; nothing was started or stopped because of it`,
    ]);
  });

  it('ignores assignments addressed to another node', async () => {
    const srv = await serverSending([{ ...reply(3, ['other-0']), node_id: 'n2' }], ack);
    const lines: string[] = [];
    const converged: string[][] = [];
    await agentFor(srv.url, lines, converged).start();
    await sleep(100);
    expect(converged).toEqual([]);
    expect(lines).toContain(`ignored a bad assignments reply from ${srv.url}: node_id is "n2", not n1; nothing was started or stopped because of it`);
  });

  it('ignores a heartbeat reply that breaks the schema, and reports whether it runs command engines', async () => {
    const srv = await serverSending([reply(1, [])], { node_id: 'n1', estimate_sources: 'a.gguf' });
    const lines: string[] = [];
    const estimated: string[] = [];
    await agentFor(srv.url, lines, [], estimated).start();
    await sleep(300);
    expect(srv.reports.length).toBeGreaterThan(2);
    expect(estimated).toEqual([]);
    expect(lines).toEqual([`ignored a bad heartbeat reply from ${srv.url}: estimate_sources must be array; nothing was started or stopped because of it`]);
    expect(srv.reports[0]?.allow_command_engine).toBe(false);
  });
});

describe('Agent: a fetched file is said until the server has it (issue 30 item 9)', () => {
  it('sends a shard’s fetched with every heartbeat until one is accepted, then no more; a new fetch is sent again', async () => {
    const sent: Array<ShardStatus['fetched'] | null> = [];
    const waiters: Array<{ n: number; done: () => void }> = [];
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += String(c)));
      req.on('end', () => {
        if (!req.url!.startsWith('/agent/v1/heartbeat')) return res.writeHead(200).end(JSON.stringify(reply(1, [])));
        sent.push((JSON.parse(raw) as { shards: ShardStatus[] }).shards[0]?.fetched ?? null);
        // The first heartbeat is lost (a 500): what it carried was not recorded.
        res.writeHead(sent.length === 1 ? 500 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(ack));
        for (const w of waiters.filter((x) => sent.length >= x.n)) w.done();
      });
    });
    const url = await listen(server);
    const beats = (n: number) => new Promise<void>((done) => (sent.length >= n ? done() : waiters.push({ n, done })));
    let fetched = { bytes: 512_000, ms: 40 };
    const agent = new Agent(
      settingsFor(url, { heartbeatIntervalMs: 20 }),
      noGpus,
      { converge: () => {}, statuses: () => [{ id: 'a-0', replica_id: 'a', state: 'ready', fetched }], onChange: () => {} },
      pino({ level: 'silent' }),
    );
    cleanups.push(() => agent.stop());
    void agent.start();
    await beats(4);
    expect(sent.slice(0, 4)).toEqual([fetched, fetched, null, null]);
    fetched = { bytes: 512_000, ms: 55 };
    const from = sent.length;
    // A heartbeat already on its way carries what it read before the change.
    await beats(from + 4);
    expect(sent.slice(from).filter((f) => f !== null)).toEqual([fetched]);
    expect(sent.slice(from, from + 2)).toContainEqual(fetched);
  });
});
