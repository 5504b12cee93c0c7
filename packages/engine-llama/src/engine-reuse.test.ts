import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeTestModel } from '@llmgw/gguf';

// The built engine on a model written for the test, as the agent runs it: real llama.cpp
// KV caches, so reuse is what node-llama-cpp really kept, not a simulation.
const here = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.resolve(here, '../dist/main.js');
const NAME = 'tiny-llama';

let child: ChildProcessWithoutNullStreams;
let url = '';
const dir = mkdtempSync(path.join(os.tmpdir(), 'llmgw-nlc-reuse-'));

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** A system prompt of roughly 20 tokens per repeat on the test model's letter-level vocabulary. */
const system = (topic: string, repeats = 25): { role: string; content: string } => ({
  role: 'system',
  content: `you answer questions about ${topic} `.repeat(repeats),
});

async function chat(messages: unknown[], extra: Record<string, unknown> = {}): Promise<{ usage: Usage; headers: Headers }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: NAME, messages, max_tokens: 4, seed: 1, ...extra }),
  });
  expect(res.status).toBe(200);
  if (extra.stream !== true) return { usage: ((await res.json()) as { usage: Usage }).usage, headers: res.headers };
  const events = (await res.text()).split('\n\n').filter((e) => e.startsWith('data: {'));
  return { usage: (JSON.parse(events[events.length - 1]!.slice('data: '.length)) as { usage: Usage }).usage, headers: res.headers };
}

const cached = (u: Usage): number => u.prompt_tokens_details.cached_tokens;

beforeAll(async () => {
  if (!existsSync(ENGINE)) throw new Error(`${ENGINE} is missing: run \`pnpm --filter @llmgw/engine-llama build\` first`);
  const model = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 11 });
  child = spawn(process.execPath, [ENGINE, '--model', model.path, '--served-name', NAME, '--port', '0', '--parallel', '2'], { stdio: 'pipe' });
  let stdout = '';
  url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no serving line; stdout:\n${stdout}`)), 10_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const m = /serving \S+ on (http:\/\/\S+)/.exec(stdout);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  while ((await fetch(`${url}/health`)).status !== 200) await new Promise((r) => setTimeout(r, 50));
}, 20_000);

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('KV cache reuse across requests', () => {
  it('reports a repeated prompt prefix as cached tokens, and its capacity in a header', async () => {
    const first = await chat([system('cats'), { role: 'user', content: 'what is up' }]);
    expect(cached(first.usage)).toBe(0);
    // Two slots of 1,024 tokens.
    expect(first.headers.get('x-llmgw-prefix-cache-tokens')).toBe('2048');
    const again = await chat([system('cats'), { role: 'user', content: 'what is down' }]);
    expect(cached(again.usage)).toBeGreaterThan(first.usage.prompt_tokens * 0.9);
    expect(cached(again.usage)).toBeLessThan(again.usage.prompt_tokens);
    const streamed = await chat([system('cats'), { role: 'user', content: 'what is up' }], { stream: true, stream_options: { include_usage: true } });
    expect(cached(streamed.usage)).toBeGreaterThan(first.usage.prompt_tokens * 0.9);
  });

  it('gives each conversation back the slot holding it, so two interleaved ones both reuse', async () => {
    const a = (q: string): unknown[] => [system('dogs'), { role: 'user', content: q }];
    const b = (q: string): unknown[] => [system('boats'), { role: 'user', content: q }];
    await chat(a('one'));
    await chat(b('one'));
    const [againA, againB] = [await chat(a('two')), await chat(b('two'))];
    expect(cached(againA.usage)).toBeGreaterThan(againA.usage.prompt_tokens * 0.9);
    expect(cached(againB.usage)).toBeGreaterThan(againB.usage.prompt_tokens * 0.9);
  });

  it('reuses a text completion prompt too', async () => {
    const complete = async (): Promise<Usage> => {
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: NAME, prompt: 'once upon a time '.repeat(20), max_tokens: 2 }),
      });
      return ((await res.json()) as { usage: Usage }).usage;
    };
    const first = await complete();
    const again = await complete();
    expect([cached(again), again.prompt_tokens]).toEqual([first.prompt_tokens - 1, first.prompt_tokens]);
  });
});
