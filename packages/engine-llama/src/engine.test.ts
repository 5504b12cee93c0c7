import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeTestModel } from '@llmgw/gguf';

// Spawns the built engine, as the agent does, on a model written for the test: the real
// llama.cpp runs, so this covers loading, sampling, batching, streaming and abort.
const here = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.resolve(here, '../dist/main.js');
const KEY = 'test-key';
const NAME = 'tiny-llama';
const PRINTABLE = /^[\x20-\x7e]+$/;

let child: ChildProcessWithoutNullStreams;
let url = '';
let stdout = '';
let stderr = '';
const lineWaiters: Array<() => void> = [];
const dir = mkdtempSync(path.join(os.tmpdir(), 'llmgw-nlc-'));
let firstHealth: { status: number; body: unknown } | undefined;

/** Resolves with the first stdout line matching `re` (checked as output arrives), and when it arrived. */
function waitForLine(re: RegExp, timeoutMs = 10_000): Promise<{ match: RegExpExecArray; at: number }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no line matching ${re} within ${timeoutMs}ms; stdout:\n${stdout}\nstderr:\n${stderr}`)), timeoutMs);
    const check = (): void => {
      const match = re.exec(stdout);
      if (match !== null) {
        clearTimeout(timer);
        lineWaiters.splice(lineWaiters.indexOf(check), 1);
        resolve({ match, at: performance.now() });
      }
    };
    lineWaiters.push(check);
    check();
  });
}

function post(route: string, body: unknown, init: { key?: string | null; signal?: AbortSignal } = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const key = init.key === undefined ? KEY : init.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${url}${route}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body), signal: init.signal });
}

interface ChatCompletion {
  choices: Array<{ message: { role: string; content: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

async function chat(extra: Record<string, unknown> = {}): Promise<ChatCompletion> {
  const res = await post('/v1/chat/completions', { model: NAME, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16, ...extra });
  expect(res.status).toBe(200);
  return (await res.json()) as ChatCompletion;
}

/** The data payloads of an SSE body, checking its framing on the way. */
function sseData(text: string): string[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => {
      expect(e.startsWith('data: ')).toBe(true);
      return e.slice('data: '.length);
    });
}

beforeAll(async () => {
  if (!existsSync(ENGINE)) throw new Error(`${ENGINE} is missing: run \`pnpm --filter @llmgw/engine-llama build\` first`);
  const model = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 11 });
  child = spawn(process.execPath, [ENGINE, '--model', model.path, '--served-name', NAME, '--port', '0', '--api-key', KEY, '--parallel', '2'], {
    stdio: 'pipe',
  });
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    [...lineWaiters].forEach((w) => w());
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const { match } = await waitForLine(/node-llama-cpp-engine: serving (\S+) on (http:\/\/\S+)/);
  expect(match[1]).toBe(NAME);
  url = match[2]!;
  for (;;) {
    const res = await fetch(`${url}/health`);
    firstHealth ??= { status: res.status, body: await res.json() };
    if (res.status === 200) break;
    await new Promise((r) => setTimeout(r, 50));
  }
}, 20_000);

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('node-llama-cpp-engine', () => {
  it('answers /health 503 while the model loads, then 200', async () => {
    // The port is bound before node-llama-cpp is even imported, so the first probe is early.
    expect(firstHealth).toEqual({ status: 503, body: { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } } });
    const res = await fetch(`${url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('lists the served model', async () => {
    const res = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    const body = (await res.json()) as { data: Array<{ id: string; object: string }> };
    expect(body.data.map((m) => [m.id, m.object])).toEqual([[NAME, 'model']]);
  });

  it('chats: printable text, usage, and the length finish at max_tokens', async () => {
    const body = await chat();
    expect(body.choices[0]!.message.role).toBe('assistant');
    expect(body.choices[0]!.message.content).toMatch(PRINTABLE);
    expect(body.choices[0]!.finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(16);
    expect(body.usage.prompt_tokens).toBeGreaterThan(5);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 16);
  });

  it('samples reproducibly with a seed and stops at a stop sequence', async () => {
    const params = { seed: 42, temperature: 1, top_p: 0.9, max_completion_tokens: 40 };
    const a = (await chat(params)).choices[0]!.message.content;
    expect((await chat(params)).choices[0]!.message.content).toBe(a);
    const stopAt = a.slice(10, 12);
    const cut = await chat({ ...params, stop: [stopAt] });
    expect(cut.choices[0]!.message.content).toBe(a.slice(0, a.indexOf(stopAt)));
    expect(cut.choices[0]!.finish_reason).toBe('stop');
  });

  it('streams chunks, then a usage chunk and [DONE] with include_usage', async () => {
    const res = await post('/v1/chat/completions', {
      model: NAME,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Count to three.' },
      ],
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const data = sseData(await res.text());
    expect(data[data.length - 1]).toBe('[DONE]');
    const chunks = data.slice(0, -1).map(
      (d) =>
        JSON.parse(d) as {
          object: string;
          choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }>;
          usage: ChatCompletion['usage'] | null;
        },
    );
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const last = chunks[chunks.length - 1];
    expect(last!.choices).toEqual([]);
    expect(last!.usage?.completion_tokens).toBe(12);
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toMatch(PRINTABLE);
  });

  it('completes a prompt', async () => {
    const res = await post('/v1/completions', { model: NAME, prompt: 'Once upon a time', max_tokens: 10 });
    const body = (await res.json()) as { object: string; choices: Array<{ text: string; finish_reason: string }>; usage: ChatCompletion['usage'] };
    expect(body.object).toBe('text_completion');
    expect(body.choices[0]!.text).toMatch(PRINTABLE);
    expect(body.choices[0]!.finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(10);
  });

  it('embeds, L2-normalised, the same text to the same vector', async () => {
    const res = await post('/v1/embeddings', { model: NAME, input: ['hello world', 'something else', 'hello world'] });
    const body = (await res.json()) as { data: Array<{ index: number; embedding: number[] }>; usage: { prompt_tokens: number } };
    expect(body.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const { embedding } of body.data) {
      expect(embedding).toHaveLength(64);
      expect(Math.hypot(...embedding)).toBeCloseTo(1, 6);
    }
    expect(body.data[2]!.embedding).toEqual(body.data[0]!.embedding);
    expect(body.data[1]!.embedding).not.toEqual(body.data[0]!.embedding);
    expect(body.usage.prompt_tokens).toBeGreaterThan(3);
  });

  it('enforces the API key and answers errors in OpenAI shape', async () => {
    for (const key of [null, 'wrong']) {
      const res = await post('/v1/chat/completions', { model: NAME, messages: [{ role: 'user', content: 'hi' }] }, { key });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' },
      });
    }
    const wrongModel = await post('/v1/chat/completions', { model: 'gpt-4', messages: [{ role: 'user', content: 'hi' }] });
    expect(wrongModel.status).toBe(404);
    expect(((await wrongModel.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
    const badJson = await post('/v1/completions', '{"prompt":');
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    const tooLong = await post('/v1/completions', { model: NAME, prompt: 'word '.repeat(2000) });
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
  });

  it('generates two requests at once', async () => {
    const started = performance.now();
    const [a, b] = await Promise.all([chat({ max_tokens: 150, seed: 1 }), chat({ max_tokens: 150, seed: 2 })]);
    expect([a.usage.completion_tokens, b.usage.completion_tokens]).toEqual([150, 150]);
    expect(a.choices[0]!.message.content).not.toBe(b.choices[0]!.message.content);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('stops a generation within 100 ms of its client leaving, then serves the next at once', async () => {
    const abort = new AbortController();
    const res = await post(
      '/v1/chat/completions',
      { model: NAME, messages: [{ role: 'user', content: 'Tell me everything.' }], max_tokens: 900, stream: true },
      { signal: abort.signal },
    );
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('"content":"') || seen.split('"content":"').length < 4) {
      const { value } = await reader.read();
      seen += new TextDecoder().decode(value);
    }
    const cancelled = waitForLine(/cancelled (chatcmpl-\w+) after (\d+) tokens: client disconnected \(generation stopped ([\d.]+) ms later\)/);
    const abortedAt = performance.now();
    abort.abort();
    const { match, at } = await cancelled;
    // The engine's own measure, from the disconnect it saw to the generation's end: the
    // line's arrival here also counts this process's scheduling, which a loaded machine
    // stretches past 100 ms (112 ms seen under scripts/load.mjs) while the engine took less.
    expect(Number(match[3])).toBeLessThan(100);
    expect(at - abortedAt).toBeLessThan(1000);
    expect(Number(match[2])).toBeLessThan(900);

    const next = performance.now();
    const body = await chat({ max_tokens: 8 });
    expect(body.usage.completion_tokens).toBe(8);
    expect(performance.now() - next).toBeLessThan(1000);
  });

  it('exits 0 promptly on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const sent = performance.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(performance.now() - sent).toBeLessThan(2000);
  });
});
