import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { checksumMismatchText, type AssignmentsReply, type ExplainView, type ModelView } from '@llmgw/shared';
import { pino } from 'pino';
import { parseCatalog } from '../src/catalog/parse.js';
import { makeServerSettings } from './live-server.js';
import { makeReport } from './factories.js';
import { seedCredential } from './credentials.js';
import { tempDirs } from './temp-dirs.js';
import { startServer, type RunningServer } from '../src/server.js';
import { SqliteStore } from '../src/store/sqlite.js';

/**
 * `ctl explain ADAPTER` on a real server (issue 31), the agent played by plain HTTP calls:
 * an adapter fetched from a URL whose bytes fail their checksum is said to be the reason
 * it cannot be served, beside its base having no ready replica.
 */
const tmp = tempDirs('llmgw-adapters-explain-', afterAll);
const DIGEST = 'ab'.repeat(32);
const CATALOG = `models:
  - name: m
    source: /models/m.gguf
    adapters:
      - { name: sql-lora, source: "https://files.invalid/sql.gguf", sha256: ${DIGEST} }
      - { name: chat-lora, source: /models/chat.gguf }
    profiles:
      - { name: cpu, engine: llama.cpp, min_memory_gb: 1 }
`;
const CRED = 'llmgw-node-a-credential';

let s: RunningServer;
beforeAll(async () => {
  const dataDir = tmp();
  const seed = new SqliteStore(dataDir);
  await seedCredential(seed, 'node-a', CRED);
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
const beat = (shards: unknown[] = []) =>
  call('POST', '/agent/v1/heartbeat', CRED, { report: makeReport({ node_id: 'node-a', mgmt_addr: '127.0.0.1', memory_total_mb: 8192 }), shards });
const admin = <T>(path: string) => call<T>('GET', `/api/v1${path}`, 'admin');

describe('explaining a LoRA adapter', () => {
  it('lists the adapters on the model, and says an adapter cannot be served while its base has no ready replica', async () => {
    const [m] = await admin<ModelView[]>('/models');
    expect(m?.adapters).toEqual([
      { name: 'sql-lora', source: 'https://files.invalid/sql.gguf', loaded_on: [] },
      { name: 'chat-lora', source: '/models/chat.gguf', loaded_on: [] },
    ]);
    const v = await admin<ExplainView>('/explain-placement?model=chat-lora');
    expect(v.model).toBe('m');
    expect(v.adapter).toEqual({ name: 'chat-lora', problems: [expect.stringMatching(/^no replica of its base m is ready/)] });
  });

  it('names the checksum when the adapter’s file failed it on a node', async () => {
    await beat();
    let reply: AssignmentsReply = { node_id: 'node-a', version: 0, assignments: [] };
    for (let after = -1; reply.assignments.length === 0; after = reply.version)
      reply = await call<AssignmentsReply>('GET', `/agent/v1/nodes/node-a/assignments?after=${after}&wait_ms=2000`, CRED);
    const a = reply.assignments[0]!;
    // The order the agent gives llama-server its --lora files, and the gateway its ids.
    expect(a.adapters?.map((x) => x.name)).toEqual(['sql-lora', 'chat-lora']);
    const error = checksumMismatchText('https://files.invalid/sql.gguf', DIGEST, '00'.repeat(32));
    await beat([{ id: a.id, replica_id: a.replica_id, state: 'failed', error }]);
    const v = await admin<ExplainView>('/explain-placement?model=sql-lora');
    expect(v.adapter?.problems).toContain(`its file failed its checksum on replica ${a.replica_id}: ${error}`);
    expect((await admin<ExplainView>('/explain-placement?model=chat-lora')).adapter?.problems.join('\n')).not.toContain('checksum');
  });
});
