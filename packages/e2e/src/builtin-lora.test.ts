import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { ExplainView, KeyCreated, ModelView, ReplicaView } from '@llmgw/shared';
import { bins, cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Journey (issue 31): a model with two real LoRA GGUF adapters on the built-in engine, one
 * slot for them, through the gateway with the official SDK. Each adapter answers with
 * its own greedy text, the base with its own, before and after the adapters swap, and
 * ctl shows where each adapter is loaded.
 */

let server: ServerProc;
let client: OpenAI;

beforeAll(async () => {
  const dir = tmpDir('llmgw-lora-');
  const model = path.join(dir, 'tiny.gguf');
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', model, '--seed', '3']);
  for (const [name, seed] of [
    ['sql-lora', '7'],
    ['faq-lora', '11'],
  ])
    execFileSync(process.execPath, [bins.agent, 'make-test-lora', '--out', path.join(dir, `${name}.gguf`), '--seed', seed!]);
  const catalog = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(
    catalog,
    `models:
  - name: tiny
    source: ${model}
    adapters:
      - { name: sql-lora, source: ${path.join(dir, 'sql-lora.gguf')} }
      - { name: faq-lora, source: ${path.join(dir, 'faq-lora.gguf')} }
    profiles:
      - { name: cpu, engine: node-llama-cpp, startup_timeout_s: 120, max_loaded_adapters: 1, args: [--parallel, '1', --context-size, '256', --threads, '1'] }
`,
  );
  server = await startServer({ catalog });
  startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
  await eventually(async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']))[0]?.state === 'ready', 90_000, 'tiny ready');
  const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
  client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const greedy = async (model: string): Promise<{ text: string; model: string }> => {
  const r = await client.completions.create({ model, prompt: 'hello there', max_tokens: 16, temperature: 0 });
  return { text: r.choices[0]!.text, model: r.model };
};

describe('LoRA adapters on the built-in engine, through the gateway', () => {
  it('serves each adapter with its own output, names it in the reply, and the base unchanged as they swap', async () => {
    const base = await greedy('tiny');
    const sql = await greedy('sql-lora');
    expect(sql.model).toBe('sql-lora');
    expect(sql.text).not.toBe(base.text);
    const [replica] = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
    expect(replica!.adapters).toEqual(['sql-lora']);

    // One slot: faq-lora's first request unloads sql-lora.
    const faq = await greedy('faq-lora');
    expect(faq.text).not.toBe(base.text);
    expect(faq.text).not.toBe(sql.text);
    expect((await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']))[0]!.adapters).toEqual(['faq-lora']);
    expect(await greedy('tiny')).toEqual(base);
    expect(await greedy('sql-lora')).toEqual(sql);
  });

  it('lists the adapters in /v1/models with their parent, and in ctl with where each is loaded', async () => {
    const ids = (await client.models.list()).data.map((m) => [m.id, (m as { parent?: string }).parent]);
    expect(ids).toEqual(
      expect.arrayContaining([
        ['sql-lora', 'tiny'],
        ['faq-lora', 'tiny'],
      ]),
    );
    const [m] = await ctlJson<ModelView[]>(server.adminUrl, ['models']);
    expect(m!.adapters?.map((a) => a.name)).toEqual(['sql-lora', 'faq-lora']);
    const shown = await ctl(server.adminUrl, ['models', 'tiny']);
    expect(shown.stdout).toMatch(/^MODEL +ADAPTER +SOURCE +LOADED ON$/m);
    expect(shown.stdout).toMatch(/^tiny +faq-lora +\S+faq-lora\.gguf +-$/m);
    const explain = await ctlJson<ExplainView>(server.adminUrl, ['explain', 'faq-lora']);
    expect(explain).toMatchObject({ model: 'tiny', adapter: { name: 'faq-lora', problems: [] } });
  });
});
