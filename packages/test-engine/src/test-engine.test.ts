import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Spawns the built bin, as the agent does, so the test covers the real startup and exit paths.
const here = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.resolve(here, '../dist/main.js');

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Engine {
  child: ChildProcessWithoutNullStreams;
  url: string;
  stdout(): string;
  stderr(): string;
  waitFor(text: string, timeoutMs?: number): Promise<void>;
  exited: Promise<Exit>;
}

const children: ChildProcessWithoutNullStreams[] = [];

function launch(args: string[]): Omit<Engine, 'url'> {
  const child = spawn(process.execPath, [ENGINE, ...args], { stdio: 'pipe' });
  children.push(child);
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    waiters.forEach((w) => w());
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<Exit>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const waitFor = (text: string, timeoutMs = 5000): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no '${text}' on stdout within ${timeoutMs}ms; got:\n${out}\nstderr:\n${err}`)), timeoutMs);
      const check = (): void => {
        if (out.includes(text)) {
          clearTimeout(timer);
          resolve();
        }
      };
      waiters.push(check);
      check();
    });
  return { child, stdout: () => out, stderr: () => err, waitFor, exited };
}

async function start(extra: string[] = [], model = 'tiny'): Promise<Engine> {
  const engine = launch(['--port', '0', '--model', model, ...extra]);
  await engine.waitFor('llmgw-test-engine: serving');
  const match = /llmgw-test-engine: serving (\S+) on (http:\/\/\S+)/.exec(engine.stdout());
  if (match === null) throw new Error(`no serving line in: ${engine.stdout()}`);
  expect(match[1]).toBe(model);
  return { ...engine, url: match[2]! };
}

function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal });
}

const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: 'tiny',
  messages: [
    { role: 'system', content: 'you are terse' },
    { role: 'user', content: 'hello there world' },
  ],
  ...extra,
});

/** Splits an SSE body into its data payloads, checking the framing on the way. */
function sseData(text: string): string[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      expect(event.startsWith('data: ')).toBe(true);
      return event.slice('data: '.length);
    });
}

beforeAll(() => {
  if (!existsSync(ENGINE)) {
    throw new Error(`${ENGINE} is missing; build it with: pnpm --filter @llmgw/test-engine build`);
  }
});

afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

describe('llmgw-test-engine', () => {
  it('serves /health and /v1/models with its headers', async () => {
    const engine = await start();
    const health = await fetch(`${engine.url}/health`, { headers: { 'x-request-id': 'req-42' } });
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    expect(health.headers.get('x-test-engine-model')).toBe('tiny');
    expect(health.headers.get('x-request-id')).toBe('req-42');

    const models = await fetch(`${engine.url}/v1/models`);
    expect(await models.json()).toEqual({
      object: 'list',
      data: [{ id: 'tiny', object: 'model', created: expect.any(Number), owned_by: 'llmgw-test-engine' }],
    });
    expect((await fetch(`${engine.url}/v2/nothing`)).status).toBe(404);
  });

  it('answers a chat completion deterministically with usage', async () => {
    const engine = await start();
    const first = await post(`${engine.url}/v1/chat/completions`, chatBody());
    expect(first.status).toBe(200);
    const body = (await first.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'tiny',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello there world' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 },
    });
    expect(body.id).toMatch(/^chatcmpl-\d+$/);

    const again = (await (await post(`${engine.url}/v1/chat/completions`, chatBody())).json()) as typeof body;
    expect(again.choices).toEqual(body.choices);

    const cut = (await (await post(`${engine.url}/v1/chat/completions`, chatBody({ max_tokens: 2 }))).json()) as typeof body;
    expect(cut).toMatchObject({
      choices: [{ message: { content: 'echo: hello' }, finish_reason: 'length' }],
      usage: { completion_tokens: 2 },
    });
  });

  it('streams chunks, the usage chunk and [DONE]', async () => {
    const engine = await start(['--token-delay-ms', '2']);
    const res = await post(`${engine.url}/v1/chat/completions`, chatBody({ stream: true, stream_options: { include_usage: true } }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const data = sseData(await res.text());
    expect(data[data.length - 1]).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, unknown> & { choices: Array<Record<string, unknown>> });
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    const content = chunks.map((c) => (c.choices[0]?.delta as { content?: string } | undefined)?.content ?? '').join('');
    expect(content).toBe('echo: hello there world');
    const last = chunks[chunks.length - 1];
    expect(last).toMatchObject({ object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 } });
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);

    const plain = sseData(await (await post(`${engine.url}/v1/chat/completions`, chatBody({ stream: true }))).text());
    expect(plain.some((d) => d.includes('"usage"'))).toBe(false);
  });

  it('reports the prompt tokens its simulated prefix cache held, with its capacity in a header', async () => {
    const engine = await start(['--prefix-cache-tokens', '4096', '--prefill-tokens-per-s', '100000', '--cache-block-tokens', '16']);
    const system = { role: 'system', content: Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ') };
    const ask = async (question: string, extra: Record<string, unknown> = {}): Promise<{ headers: Headers; text: string }> => {
      const res = await post(`${engine.url}/v1/chat/completions`, { model: 'tiny', messages: [system, { role: 'user', content: question }], ...extra });
      return { headers: res.headers, text: await res.text() };
    };
    const details = (text: string): unknown => (JSON.parse(text) as { usage: { prompt_tokens_details: unknown } }).usage.prompt_tokens_details;
    const first = await ask('what is up');
    expect(first.headers.get('x-llmgw-prefix-cache-tokens')).toBe('4096');
    expect(details(first.text)).toEqual({ cached_tokens: 0 });
    // 203 tokens: the 200 of the system prompt are 12 whole blocks, found again.
    expect(details((await ask('what is down')).text)).toEqual({ cached_tokens: 192 });
    const streamed = sseData((await ask('what is up', { stream: true, stream_options: { include_usage: true } })).text);
    expect(details(streamed[streamed.length - 2]!)).toEqual({ cached_tokens: 192 });
    // Two 40-word prompts in one request: the second finds the first's 2 whole blocks.
    const words40 = system.content.split(' ').slice(0, 40).join(' ');
    const completion = await post(`${engine.url}/v1/completions`, { model: 'tiny', prompt: [words40, words40] });
    expect(((await completion.json()) as { usage: unknown }).usage).toMatchObject({ prompt_tokens: 80, prompt_tokens_details: { cached_tokens: 32 } });
  });

  it('serves completions and embeddings', async () => {
    const engine = await start();
    const completion = await post(`${engine.url}/v1/completions`, { model: 'tiny', prompt: ['a b', 'c'], max_tokens: 8, ignore_eos: true });
    expect(await completion.json()).toMatchObject({
      object: 'text_completion',
      choices: [
        { index: 0, text: 'echo: a b echo: a b echo: a', finish_reason: 'length' },
        { index: 1, text: 'echo: c echo: c echo: c echo: c', finish_reason: 'length' },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 16 },
    });

    const streamed = sseData(await (await post(`${engine.url}/v1/completions`, { model: 'tiny', prompt: 'x', stream: true })).text());
    expect(streamed[streamed.length - 1]).toBe('[DONE]');

    const embRes = await post(`${engine.url}/v1/embeddings`, { model: 'tiny', input: ['same text', 'other text', 'same text'] });
    const emb = (await embRes.json()) as { data: Array<{ index: number; embedding: number[] }>; usage: { prompt_tokens: number } };
    expect(emb.data).toHaveLength(3);
    expect(emb.data[0]!.embedding).toHaveLength(8);
    expect(Math.hypot(...emb.data[1]!.embedding)).toBeCloseTo(1, 10);
    expect(emb.data[2]!.embedding).toEqual(emb.data[0]!.embedding);
    expect(emb.data[1]!.embedding).not.toEqual(emb.data[0]!.embedding);
    expect(emb.usage.prompt_tokens).toBe(6);
  });

  it('reports bad requests in OpenAI error shape', async () => {
    const engine = await start();
    const unknown = await post(`${engine.url}/v1/chat/completions`, { ...chatBody(), model: 'other' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: { message: 'The model `other` does not exist.', type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    });
    const broken = await fetch(`${engine.url}/v1/chat/completions`, { method: 'POST', body: '{"model":' });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
  });

  it('enforces --api-key on /v1/* only', async () => {
    const engine = await start(['--api-key', 'sk-test']);
    const missing = await post(`${engine.url}/v1/chat/completions`, chatBody());
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error' } });
    expect((await fetch(`${engine.url}/v1/models`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await post(`${engine.url}/v1/chat/completions`, chatBody(), { authorization: 'Bearer sk-test' })).status).toBe(200);
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
  });

  it('fails inference requests with --fail-status but still lists models', async () => {
    const engine = await start(['--fail-status', '429']);
    const res = await post(`${engine.url}/v1/chat/completions`, chatBody());
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'injected_failure' } });
    expect((await fetch(`${engine.url}/v1/models`)).status).toBe(200);
  });

  it('answers 503 while loading with --load-mode 503', async () => {
    const engine = await start(['--load-delay-ms', '400', '--load-mode', '503']);
    const health = await fetch(`${engine.url}/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
    expect((await fetch(`${engine.url}/v1/models`)).status).toBe(503);
    await engine.waitFor('llmgw-test-engine: ready');
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    expect((await fetch(`${engine.url}/v1/models`)).status).toBe(200);
  });

  it('does not listen while loading in the default refuse mode', async () => {
    const begun = Date.now();
    const engine = await start(['--load-delay-ms', '300']);
    expect(Date.now() - begun).toBeGreaterThanOrEqual(300);
    expect(engine.stdout()).toMatch(/loading tiny/);
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
  });

  it('exits with code 3 when the request after --crash-after N arrives', async () => {
    const engine = await start(['--crash-after', '2']);
    expect((await post(`${engine.url}/v1/chat/completions`, chatBody())).status).toBe(200);
    // /v1/models is not an inference request, so probes can't use up the budget.
    expect((await fetch(`${engine.url}/v1/models`)).status).toBe(200);
    expect((await post(`${engine.url}/v1/embeddings`, { model: 'tiny', input: 'x' })).status).toBe(200);
    await expect(post(`${engine.url}/v1/chat/completions`, chatBody())).rejects.toThrow();
    expect(await engine.exited).toEqual({ code: 3, signal: null });
    expect(engine.stderr()).toMatch(/fatal: --crash-after 2 reached at inference request 3/);
  });

  it('exits at once with --exit-immediately CODE', async () => {
    const engine = launch(['--port', '0', '--model', 'tiny', '--exit-immediately', '7']);
    expect(await engine.exited).toEqual({ code: 7, signal: null });
    expect(engine.stderr()).toMatch(/fatal: cannot load model tiny/);
    expect(engine.stdout()).toBe('');
  });

  it('rejects unknown flags with exit code 2 and one line', async () => {
    const engine = launch(['--port', '0', '--model', 'tiny', '--bogus', '1']);
    expect(await engine.exited).toEqual({ code: 2, signal: null });
    expect(engine.stderr().trim().split('\n')).toEqual(['llmgw-test-engine: error: unknown flag --bogus (see --help)']);
  });

  it('stops generating when the client disconnects', async () => {
    const engine = await start(['--token-delay-ms', '150']);
    const abort = new AbortController();
    const res = await post(`${engine.url}/v1/chat/completions`, chatBody({ stream: true, max_tokens: 100, ignore_eos: true }), {}, abort.signal);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"role":"assistant"');
    abort.abort();
    await engine.waitFor('cancelled chatcmpl-', 2000);
    expect(engine.stdout()).toMatch(/cancelled chatcmpl-\d+ after [01]\/100 tokens: client disconnected/);

    const begun = Date.now();
    const next = await post(`${engine.url}/v1/chat/completions`, chatBody({ max_tokens: 1 }));
    expect(next.status).toBe(200);
    expect(Date.now() - begun).toBeLessThan(1000);
  });

  it('exits 0 promptly on SIGTERM', async () => {
    const engine = await start();
    const begun = Date.now();
    engine.child.kill('SIGTERM');
    expect(await engine.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - begun).toBeLessThan(500);
  });
});
