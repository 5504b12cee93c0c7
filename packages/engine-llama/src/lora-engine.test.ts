import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeTestLora, writeTestModel } from '@llmgw/gguf';
import { LlamaRuntime } from './runtime.js';
import { createEngineServer } from './server.js';

// Issue 31: the built-in engine serves real LoRA GGUF adapters by name, over HTTP. Two
// adapters and room for one: the second's first request unloads the first, and the
// first's next request loads it again. One thread, one sequence, a small context: the
// tests share two loaded cores.
const NAME = 'tiny';
describe('the built-in engine with LoRA adapters', () => {
  let dir: string;
  let runtime: LlamaRuntime;
  let close: () => Promise<void>;
  let url: string;
  const log: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-lora-engine-'));
    const model = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 3 });
    const a = writeTestLora(path.join(dir, 'a.gguf'), { seed: 7 });
    const b = writeTestLora(path.join(dir, 'b.gguf'), { seed: 11 });
    runtime = await LlamaRuntime.load({
      modelPath: model.path,
      threads: 1,
      parallel: 1,
      contextSize: 128,
      adapters: [
        { name: 'lora-a', path: a.path },
        { name: 'lora-b', path: b.path },
      ],
      maxLoras: 1,
      log: (line) => log.push(line),
    });
    const engine = createEngineServer({ servedName: NAME, apiKey: null, vocabSize: null, log: () => {} });
    engine.setBackend(runtime);
    await new Promise<void>((resolve) => engine.server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => engine.server.close(() => resolve()));
  }, 60_000);
  afterAll(async () => {
    await close?.();
    await runtime?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const complete = async (model: string): Promise<{ status: number; body: { model?: string; choices?: { text: string }[]; error?: { code: string } } }> => {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: 'hello there', max_tokens: 16, temperature: 0 }),
    });
    return { status: res.status, body: (await res.json()) as never };
  };
  const text = async (model: string): Promise<string> => {
    const r = await complete(model);
    expect(r.status).toBe(200);
    // The reply names what served it: the adapter, or the base.
    expect(r.body.model).toBe(model);
    return r.body.choices?.[0]?.text ?? '';
  };

  it('serves an adapter by name with output the base does not give, and unloads it for another, the base unchanged', async () => {
    const base = await text(NAME);
    expect(base.length).toBeGreaterThan(0);
    expect(runtime.adapters().loaded).toEqual([]);

    const a = await text('lora-a');
    expect(a).not.toBe(base);
    expect(runtime.adapters()).toMatchObject({ loaded: ['lora-a'], loads: 1, unloads: 0 });

    const b = await text('lora-b');
    expect(b).not.toBe(base);
    expect(b).not.toBe(a);
    // Room for one: lora-a was unloaded to load lora-b.
    expect(runtime.adapters()).toMatchObject({ loaded: ['lora-b'], loads: 2, unloads: 1 });

    expect(await text(NAME)).toBe(base);
    // Loaded again, from the file: the same output as the first time.
    expect(await text('lora-a')).toBe(a);
    expect(runtime.adapters()).toMatchObject({ loaded: ['lora-a'], loads: 3, unloads: 2 });
    expect(log.some((l) => /^loaded adapter lora-a in /.test(l))).toBe(true);
  }, 60_000);

  it('streams a chat with the adapter, each chunk naming it', async () => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lora-b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, stream: true }),
    });
    expect(res.status).toBe(200);
    const chunks = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { model: string });
    expect(chunks.length).toBeGreaterThan(1);
    expect(new Set(chunks.map((c) => c.model))).toEqual(new Set(['lora-b']));
  }, 30_000);

  it('answers 404 model_not_found for a name that is neither the model nor an adapter', async () => {
    const r = await complete('lora-c');
    expect(r.status).toBe(404);
    expect(r.body.error?.code).toBe('model_not_found');
  });

  it('lists the adapter counts in /metrics', async () => {
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^llmgw_engine_lora_loaded 1$/m);
    expect(metrics).toMatch(/^llmgw_engine_lora_loads_total 4$/m);
    expect(metrics).toMatch(/^llmgw_engine_lora_unloads_total 3$/m);
  });
});

describe('node-llama-cpp-engine --lora', () => {
  const ENGINE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/main.js');
  const run = (args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, [ENGINE, ...args], (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }));
    });

  it('refuses at start, naming the adapter, a file that is not a LoRA GGUF', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-lora-bad-'));
    try {
      const model = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 3 }).path;
      const missing = await run(['--model', model, '--port', '0', '--lora', `gone=${path.join(dir, 'gone.gguf')}`]);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain(`cannot load LoRA adapter gone from ${path.join(dir, 'gone.gguf')}`);
      const notAdapter = await run(['--model', model, '--port', '0', '--lora', `base=${model}`]);
      expect(notAdapter.code).not.toBe(0);
      expect(notAdapter.stderr).toContain(`cannot load LoRA adapter base: ${model} is not a LoRA GGUF (general.type null, not "adapter")`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
