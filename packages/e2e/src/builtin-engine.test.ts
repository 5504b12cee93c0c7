import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, NodeView, ReplicaView } from '@llmgw/shared';
import { bins, cleanup, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Journey: a CPU node with nothing but the agent serves a GGUF with the built-in engine
 * (real llama.cpp inference through node-llama-cpp), sized from the file's own header,
 * and an application uses it through the gateway with the official SDK.
 */

let server: ServerProc;
let stateDir: string;
let client: OpenAI;

beforeAll(async () => {
  const dir = tmpDir('llmgw-gguf-');
  const model = path.join(dir, 'tiny.gguf');
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', model, '--seed', '7']);
  const catalog = path.join(dir, 'catalog.yaml');
  // No min_memory_gb: the agent estimates it from the GGUF header.
  fs.writeFileSync(
    catalog,
    `models:\n  - name: tiny\n    source: ${model}\n    profiles:\n      - { name: cpu, engine: node-llama-cpp, startup_timeout_s: 120 }\n`,
  );
  server = await startServer({ catalog });
  stateDir = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] }).stateDir;
  await eventually(async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']))[0]?.state === 'ready', 90_000, 'tiny ready');
  const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
  client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('the built-in CPU engine through the gateway', () => {
  it('reserves the memory estimated from the GGUF header', async () => {
    const node = (await ctlJson<NodeView[]>(server.adminUrl, ['nodes']))[0]!;
    // Weights (~0.45 MB) + KV cache + the engine's fixed overhead: a few hundred MB, not 0.
    expect(node.memory_reserved_gb).toBeGreaterThan(0.2);
    expect(node.memory_reserved_gb).toBeLessThan(1);
  });

  it('chats, streams with usage and embeds with the official client', async () => {
    const chat = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 12, seed: 3 });
    expect(chat.choices[0]!.message.content).toMatch(/^[\x20-\x7e]+$/);
    expect(chat.usage!.completion_tokens).toBe(12);

    const stream = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage!.completion_tokens).toBe(16);

    const emb = await client.embeddings.create({ model: 'tiny', input: ['one', 'two'] });
    expect(emb.data).toHaveLength(2);
    expect(Math.hypot(...emb.data[1]!.embedding)).toBeCloseTo(1, 4);
  });

  it('serves two requests at once', async () => {
    const both = await Promise.all(
      [1, 2].map((seed) => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'go' }], max_tokens: 40, seed })),
    );
    expect(both.map((r) => r.usage!.completion_tokens)).toEqual([40, 40]);
  });

  it('stops the generation when the client leaves mid-stream', async () => {
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'tiny', messages: [{ role: 'user', content: 'long' }], max_tokens: 900, stream: true },
      { signal: abort.signal },
    );
    let n = 0;
    try {
      for await (const _ of stream) if (++n === 5) abort.abort();
    } catch {
      /* aborted */
    }
    const [replica] = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
    const log = path.join(stateDir, 'logs', `${replica!.shards[0]!.id}.log`);
    const line = await eventually(
      () => fs.readFileSync(log, 'utf8').match(/cancelled \S+ after (\d+) tokens: client disconnected \(generation stopped ([\d.]+) ms later\)/) ?? undefined,
      5000,
      'cancel line',
    );
    expect(Number(line[2])).toBeLessThan(100);
    expect(Number(line[1])).toBeLessThan(900);
  });
});
