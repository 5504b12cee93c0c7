import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, NodeFileView, NodeView, ReplicaView } from '@llmgw/shared';
import {
  ADMIN_TOKEN,
  JOIN_TOKEN,
  adminFetch,
  bins,
  cleanup,
  ctl,
  ctlJson,
  eventually,
  removeTmp,
  startAgent,
  startServer,
  tmpDir,
  type ServerProc,
} from './harness.js';

/**
 * Journey: a fleet without outside access serves a GGUF from the server's own
 * --models-dir as `llmgw://tiny.gguf`. The server checks the catalog, sizes the model
 * from the file's header, and serves the file to agents with their node credential; an
 * agent fetches it into its model cache, verifies it and serves a chat from it.
 */

let server: ServerProc;
let stateDir: string;
let modelsDir: string;
let catalog: string;
let digest: string;

beforeAll(async () => {
  const dir = tmpDir('llmgw-sources-');
  modelsDir = path.join(dir, 'models');
  fs.mkdirSync(modelsDir);
  const model = path.join(modelsDir, 'tiny.gguf');
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', model, '--seed', '7']);
  digest = createHash('sha256').update(fs.readFileSync(model)).digest('hex');
  catalog = path.join(dir, 'catalog.yaml');
  // No min_memory_gb: the server reads it from the file's header.
  fs.writeFileSync(
    catalog,
    `models:\n  - name: tiny\n    source: llmgw://tiny.gguf\n    sha256: ${digest}\n    profiles:\n      - { name: cpu, engine: node-llama-cpp, startup_timeout_s: 120 }\n`,
  );
  server = await startServer({ catalog, args: ['--models-dir', modelsDir] });
  stateDir = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] }).stateDir;
}, 60_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('llmgw:// sources on the server', () => {
  it('refuses to start on such a catalog without --models-dir, saying what to do', () => {
    const r = spawnSync(
      process.execPath,
      [bins.server, '--catalog', catalog, '--data-dir', tmpDir('llmgw-server-'), '--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0'],
      {
        encoding: 'utf8',
        env: { ...process.env, LLMGW_ADMIN_TOKEN: ADMIN_TOKEN, LLMGW_JOIN_TOKEN: JOIN_TOKEN },
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(
      `model "tiny" (line 3): source llmgw://tiny.gguf is served from the server's --models-dir: start llmgw-server with --models-dir DIR holding tiny.gguf, or use an http(s):// URL`,
    );
  });

  it('places the model with the memory read from the header by the server', async () => {
    // Weights (~0.45 MB) + KV cache + the engine's overhead: a few hundred MB, not 0.
    const node = await eventually(
      async () => (await ctlJson<NodeView[]>(server.adminUrl, ['nodes'])).find((n) => n.id === 'cpu-1' && n.memory_reserved_gb),
      30_000,
      'a replica on cpu-1',
    );
    expect(node.memory_reserved_gb).toBeGreaterThan(0.2);
    expect(node.memory_reserved_gb).toBeLessThan(1);
  });

  it('serves the file to the agent with its node credential, resumably, and to no one else', async () => {
    const { credential } = JSON.parse(fs.readFileSync(path.join(stateDir, 'node-credential.json'), 'utf8')) as { credential: string };
    const url = `${server.adminUrl}/agent/v1/files/tiny.gguf`;
    const part = await adminFetch(url, { headers: { authorization: `Bearer ${credential}`, range: 'bytes=4-' } });
    expect(part.status).toBe(206);
    const size = fs.statSync(path.join(modelsDir, 'tiny.gguf')).size;
    expect(part.headers.get('content-range')).toBe(`bytes 4-${size - 1}/${size}`);
    expect(Buffer.from(await part.arrayBuffer())).toEqual(fs.readFileSync(path.join(modelsDir, 'tiny.gguf')).subarray(4));
    expect((await adminFetch(url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(401);
    const out = await adminFetch(`${server.adminUrl}/agent/v1/files/..%2Fcatalog.yaml`, { headers: { authorization: `Bearer ${credential}` } });
    expect(out.status).toBe(404);
    expect(await out.text()).not.toContain('models:');
  });
});

describe('llmgw:// sources with an agent that fetches', () => {
  it('fetches the file, runs it, serves a chat completion, and lists it among the node’s files', async () => {
    await eventually(async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']))[0]?.state === 'ready', 90_000, 'tiny ready');
    const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
    const client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 });
    expect(chat.choices[0]!.message.content).toMatch(/^[\x20-\x7e]+$/);
    const files = await eventually(
      async () => (await ctlJson<NodeFileView[]>(server.adminUrl, ['files', '--node', 'cpu-1'])).find((f) => f.sha256 === digest),
      15_000,
      'the file in cpu-1 cache',
    );
    expect(files).toMatchObject({ node: 'cpu-1', source: 'llmgw://tiny.gguf', in_use: true });
    const table = await ctl(server.adminUrl, ['files']);
    expect(table.stdout).toMatch(new RegExp(`^cpu-1\\s+${digest.slice(0, 12)}\\s+.*\\s+yes\\s+llmgw://tiny\\.gguf$`, 'm'));
  }, 120_000);
});
