import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AssignmentsReply, EventList, ExplainView, NodeFileView, ReplicaView } from '@llmgw/shared';
import { pino } from 'pino';
import { parseCatalog } from '../src/catalog/parse.js';
import { makeServerSettings } from './live-server.js';
import { makeReport } from './factories.js';
import { seedCredential } from './credentials.js';
import { tempDirs } from './temp-dirs.js';
import { startServer, type RunningServer } from '../src/server.js';
import { SqliteStore } from '../src/store/sqlite.js';

/**
 * A URL source end to end on the server, with a real server and the agent played by
 * plain HTTP calls: the assignment asks for the file, the agent's progress shows in
 * the replica and the explanation, its start, end and failure are events, and its
 * cache is listed.
 */
const tmp = tempDirs('llmgw-downloads-', afterAll);
const DIGEST = 'ab'.repeat(32);
const CATALOG = `models:
  - name: m
    source: https://user:pw@files.example/m.gguf?token=t
    sha256: ${DIGEST.toUpperCase()}
    profiles:
      - { name: cpu, engine: llama.cpp, min_memory_gb: 1 }
`;
const creds: Record<string, string> = { 'node-a': 'llmgw-node-a-credential', 'node-b': 'llmgw-node-b-credential' };

let s: RunningServer;
beforeAll(async () => {
  const dataDir = tmp();
  const seed = new SqliteStore(dataDir);
  for (const [id, secret] of Object.entries(creds)) await seedCredential(seed, id, secret);
  await seed.close();
  s = await startServer(makeServerSettings(dataDir, { reconcileIntervalMs: 100 }), parseCatalog(CATALOG, 'c.yaml'), pino({ level: 'silent' }));
});
afterAll(async () => {
  await s.close();
});

async function call<T>(method: string, path: string, auth: string, body?: unknown): Promise<T> {
  const r = await fetch(`${s.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return JSON.parse(text) as T;
}
const files = [
  { sha256: 'cd'.repeat(32), source: 'https://files.example/old.gguf', size_bytes: 5, last_used_ms: 2000, in_use: false },
  { sha256: 'ef'.repeat(32), source: 'llmgw://x.gguf', size_bytes: 7, last_used_ms: 1000, in_use: true },
];
const beat = (node: string, shards: unknown[] = [], extra = {}) =>
  call('POST', '/agent/v1/heartbeat', creds[node]!, {
    report: makeReport({ node_id: node, mgmt_addr: '127.0.0.1', memory_total_mb: 8192, ...(node === 'node-a' ? { files } : {}), ...extra }),
    shards,
  });
const admin = <T>(path: string) => call<T>('GET', `/api/v1${path}`, 'admin');

describe('a model file on its way to a node', () => {
  it('is asked for on the assignment, shows while it comes, and is recorded when it starts and ends', async () => {
    await beat('node-a');
    let reply: AssignmentsReply = { node_id: 'node-a', version: 0, assignments: [] };
    for (let after = -1; reply.assignments.length === 0; after = reply.version)
      reply = await call<AssignmentsReply>('GET', `/agent/v1/nodes/node-a/assignments?after=${after}&wait_ms=2000`, creds['node-a']!);
    const a = reply.assignments[0]!;
    expect(a.file).toEqual({ url: 'https://user:pw@files.example/m.gguf?token=t', sha256: DIGEST });
    const shard = (extra: Record<string, unknown>) => ({ id: a.id, replica_id: a.replica_id, ...extra });
    const progress = { done_bytes: 210_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 };
    await beat('node-a', [shard({ state: 'starting', download: progress })]);
    const [r] = await admin<ReplicaView[]>('/replicas');
    expect(r?.shards[0]?.download).toEqual(progress);
    expect((await admin<ExplainView>('/explain-placement?model=m')).downloads).toEqual([{ replica: a.replica_id, node: 'node-a', progress }]);
    // Another node cannot speak for the shard.
    await beat('node-b', [shard({ state: 'starting', download: { done_bytes: 1, bytes_per_s: 1 } })]);
    expect((await admin<ReplicaView[]>('/replicas'))[0]?.shards[0]?.download).toEqual(progress);
    await beat('node-a', [shard({ state: 'starting' })]);
    expect((await admin<ReplicaView[]>('/replicas'))[0]?.shards[0]).not.toHaveProperty('download');
    const ev = (await admin<EventList>('/events?model=m')).events.filter((e) => e.reason.startsWith('download'));
    expect(ev.map((e) => [e.type, e.reason, e.nodes, e.message])).toEqual([
      ['Normal', 'download-started', ['node-a'], 'downloading https://files.example/m.gguf to node-a (466 MB)'],
      ['Normal', 'download-done', ['node-a'], expect.stringMatching(/^downloaded https:\/\/files\.example\/m\.gguf to node-a \(466 MB in about \d+ m?s\)$/)],
    ]);
  });

  it('a failure while it comes is a warning with the agent’s reason', async () => {
    const [r] = await admin<ReplicaView[]>('/replicas');
    const shard = { id: r!.shards[0]!.id, replica_id: r!.id };
    await beat('node-a', [{ ...shard, state: 'starting', download: { done_bytes: 5, total_bytes: 10, bytes_per_s: 1 } }]);
    await beat('node-a', [{ ...shard, state: 'failed', error: `sha256 mismatch: expected ${DIGEST}, got ${'00'.repeat(32)}` }]);
    const [failed] = (await admin<EventList>('/events?model=m')).events.filter((e) => e.reason === 'download-failed');
    expect(failed).toMatchObject({
      type: 'Warning',
      message: expect.stringMatching(
        new RegExp(
          `^download of https://files.example/m.gguf to node-a failed after about \\d+ m?s \\(downloading 50% .*\\): sha256 mismatch: expected ${DIGEST}, got 0{64}$`,
        ),
      ),
    });
  });

  it('a file that came between two heartbeats (`fetched`) is download-done; a failed fetch (`download_failed`) is download-failed, not engine-failed', async () => {
    const [r] = await admin<ReplicaView[]>('/replicas');
    const node = r!.shards[0]!.node;
    const shard = { id: r!.shards[0]!.id, replica_id: r!.id };
    const reasons = async () =>
      (await admin<EventList>('/events?model=m')).events
        .filter((e) => e.object === `replica/${r!.id}` && /^(download-|engine-failed)/.test(e.reason))
        .map((e) => e.reason);
    const before = await reasons();
    await beat(node, [{ ...shard, state: 'ready', port: 40001, fetched: { bytes: 512_000, ms: 120 } }]);
    await beat(node, [{ ...shard, state: 'ready', port: 40001, fetched: { bytes: 512_000, ms: 120 } }]);
    const [done] = (await admin<EventList>('/events?model=m')).events.filter((e) => e.reason === 'download-done' && e.message.includes('512 KB'));
    expect(done?.message).toBe(`downloaded https://files.example/m.gguf to ${node} (512 KB in 120 ms, 4.3 MB/s)`);
    const cut = 'cannot fetch https://files.example/m.gguf: the file server answered 404 Not Found after 5 restarts; last log lines:\n(none)';
    await beat(node, [{ ...shard, state: 'failed', error: cut, download_failed: true }]);
    expect((await reasons()).slice(before.length)).toEqual(['download-done', 'download-failed']);
  });

  it('lists each node’s cached files, least recently used first, and refuses an unknown node', async () => {
    expect(await admin<NodeFileView[]>('/files?node=node-a')).toEqual([
      { node: 'node-a', sha256: 'ef'.repeat(32), source: 'llmgw://x.gguf', size_bytes: 7, last_used: new Date(1000).toISOString(), in_use: true },
      {
        node: 'node-a',
        sha256: 'cd'.repeat(32),
        source: 'https://files.example/old.gguf',
        size_bytes: 5,
        last_used: new Date(2000).toISOString(),
        in_use: false,
      },
    ]);
    expect(await admin<NodeFileView[]>('/files?node=node-b')).toEqual([]);
    await expect(admin('/files?node=nope')).rejects.toThrow('404 {"error":"no node \\"nope\\" (see ctl nodes)","code":"not_found"}');
  });
});
