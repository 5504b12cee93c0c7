import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeTestModel } from '@llmgw/gguf';
import { SUPPORT } from './support.js';

// The request features agents and harnesses send, on the built engine with a generated
// GGUF: the real llama.cpp samples, so each feature is seen to change the output.
const here = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.resolve(here, '../dist/main.js');
const NAME = 'tiny';
let child: ChildProcessWithoutNullStreams;
let url = '';
const dir = mkdtempSync(path.join(os.tmpdir(), 'llmgw-nlc-features-'));

beforeAll(async () => {
  if (!existsSync(ENGINE)) throw new Error(`${ENGINE} is missing: run \`pnpm --filter @llmgw/engine-llama build\` first`);
  const model = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 11 });
  child = spawn(process.execPath, [ENGINE, '--model', model.path, '--served-name', NAME, '--port', '0'], { stdio: 'pipe' });
  let stdout = '';
  url = await new Promise<string>((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`engine exited ${code}: ${stdout}`)));
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const m = /serving \S+ on (http:\/\/\S+)/.exec(stdout);
      if (m) resolve(m[1]!);
    });
  });
  while ((await fetch(`${url}/health`)).status !== 200) await new Promise((r) => setTimeout(r, 50));
}, 30_000);

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

type Obj = Record<string, unknown>;
type Call = { index?: number; type: string; function: { name: string; arguments: string } };
/** The parts of OpenAI's replies these tests read. */
interface Reply {
  error: { param: string };
  choices: Array<{
    text: string;
    finish_reason: string | null;
    message: { content: string; tool_calls: Call[] };
    delta?: { tool_calls?: Call[] };
    logprobs: {
      content: Array<{ token: string; logprob: number; top_logprobs: Array<{ logprob: number }> }>;
      tokens: string[];
      token_logprobs: Array<number | null>;
      top_logprobs: Array<Record<string, number> | null>;
    };
  }>;
}

async function post(route: string, body: Obj): Promise<{ status: number; body: Reply; text: string }> {
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: NAME, ...body }),
  });
  const text = await res.text();
  let parsed = {} as Reply;
  try {
    parsed = JSON.parse(text) as Reply;
  } catch {
    // a stream
  }
  return { status: res.status, body: parsed, text };
}

const GREEDY = { messages: [{ role: 'user', content: 'Tell me a story about the sea.' }], max_tokens: 24, temperature: 0, seed: 1 };
const chatText = async (extra: Obj = {}) => {
  const r = await post('/v1/chat/completions', { ...GREEDY, ...extra });
  expect(r.status).toBe(200);
  return r.body.choices[0]!.message.content;
};

describe('sampling parameters are honoured', () => {
  it.each([
    ['frequency_penalty', { frequency_penalty: 2 }],
    ['presence_penalty', { presence_penalty: 2 }],
    ['repetition_penalty', { repetition_penalty: 2 }],
  ])('%s changes a greedy output', async (_name, extra) => {
    const plain = await chatText();
    expect(await chatText()).toBe(plain);
    expect(await chatText(extra)).not.toBe(plain);
  });

  it('logit_bias changes the output: +100 makes a token win, -100 bans it', async () => {
    const plain = await chatText();
    const biased = await chatText({ logit_bias: { '42': 100 } });
    expect(biased).not.toBe(plain);
    const completion = async (extra: Obj) =>
      (await post('/v1/completions', { prompt: 'a b c', max_tokens: 3, temperature: 0, ...extra })).body.choices[0]!.text;
    const forced = await completion({ logit_bias: { '42': 100 } });
    expect(await completion({ logit_bias: { '42': 100, '43': 50 } })).toBe(forced);
    expect(await completion({ logit_bias: { '42': -100, '43': 100 } })).not.toBe(forced);
  });

  it('top_k and min_p are taken and checked', async () => {
    expect((await post('/v1/chat/completions', { ...GREEDY, temperature: 1, top_k: 1, min_p: 0.2 })).status).toBe(200);
    const bad = await post('/v1/chat/completions', { ...GREEDY, min_p: 2 });
    expect([bad.status, bad.body.error.param]).toEqual([400, 'min_p']);
  });
});

describe('structured output and tools', () => {
  it('a json_schema response_format returns JSON matching the schema', async () => {
    // Bounded, since a model of random weights would otherwise write one string until max_tokens.
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 12 }, size: { enum: ['s', 'm', 'l'] }, ok: { type: 'boolean' } },
      required: ['name', 'size', 'ok'],
    };
    const r = await post('/v1/chat/completions', { ...GREEDY, max_tokens: 200, response_format: { type: 'json_schema', json_schema: { name: 'p', schema } } });
    expect(r.status).toBe(200);
    const value = JSON.parse(r.body.choices[0]!.message.content) as Obj;
    expect(typeof value.name).toBe('string');
    expect((value.name as string).length).toBeLessThanOrEqual(12);
    expect(['s', 'm', 'l']).toContain(value.size);
    expect(typeof value.ok).toBe('boolean');
    const any = await post('/v1/chat/completions', { ...GREEDY, max_tokens: 200, response_format: { type: 'json_object' } });
    expect(any.status).toBe(200);
  });

  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 16 } } } } },
  ];

  it('a forced tool call returns tool_calls with JSON arguments, streamed and not', async () => {
    const choice = { type: 'function', function: { name: 'get_weather' } };
    const r = await post('/v1/chat/completions', { ...GREEDY, max_tokens: 200, tools, tool_choice: choice });
    expect(r.status).toBe(200);
    const c = r.body.choices[0]!;
    expect(c.finish_reason).toBe('tool_calls');
    expect(c.message.tool_calls[0]).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
    expect(typeof (JSON.parse(c.message.tool_calls[0]!.function.arguments) as Obj).city).toBe('string');
    const s = await post('/v1/chat/completions', { ...GREEDY, max_tokens: 200, tools, tool_choice: 'required', stream: true });
    const chunks = s.text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as Reply);
    const call = chunks.find((k) => k.choices[0]?.delta?.tool_calls)!.choices[0]!.delta!.tool_calls![0]!;
    expect(call).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather' } });
    expect(() => JSON.parse(call.function.arguments) as unknown).not.toThrow();
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('accepts a role: tool message answering an earlier call, and tool_choice auto and none', async () => {
    const messages = [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'Rain, 8 degrees.' },
    ];
    for (const tool_choice of ['auto', 'none']) {
      const r = await post('/v1/chat/completions', { ...GREEDY, messages, tools, tool_choice });
      expect(r.status).toBe(200);
    }
    const orphan = await post('/v1/chat/completions', { ...GREEDY, messages: [{ role: 'tool', tool_call_id: 'x', content: 'y' }] });
    expect(orphan.status).toBe(400);
  });
});

describe('logprobs', () => {
  it('chat logprobs with top_logprobs: 2 give each token and two alternatives', async () => {
    const r = await post('/v1/chat/completions', { ...GREEDY, max_tokens: 6, logprobs: true, top_logprobs: 2 });
    const content = r.body.choices[0]!.logprobs.content;
    expect(content.length).toBeGreaterThan(0);
    expect(content.map((t) => t.token).join('')).toBe(r.body.choices[0]!.message.content);
    for (const t of content) {
      expect(t.top_logprobs).toHaveLength(2);
      expect(t.logprob).toBeLessThanOrEqual(0);
      // Greedy: the chosen token is the most likely one.
      expect(t.logprob).toBeCloseTo(t.top_logprobs[0]!.logprob, 5);
    }
  });

  it("completions with echo and logprobs give the prompt's logprobs, with max_tokens 0 (lm-eval's loglikelihood request)", async () => {
    const zero = await post('/v1/completions', { prompt: 'The sea is', max_tokens: 0, echo: true, logprobs: 1 });
    expect(zero.status).toBe(200);
    const lp = zero.body.choices[0]!.logprobs;
    expect(zero.body.choices[0]!.text).toBe('The sea is');
    expect(lp.tokens.join('')).toBe('The sea is');
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.token_logprobs.slice(1).every((x) => x !== null && x <= 0)).toBe(true);
    // What lm-eval's local-completions sends: token ids, one token, echo, logprobs 1, greedy.
    const lm = await post('/v1/completions', { prompt: [5, 17, 33, 60], max_tokens: 1, echo: true, logprobs: 1, temperature: 0, seed: 1234 });
    expect(lm.status).toBe(200);
    const l = lm.body.choices[0]!.logprobs;
    expect(l.token_logprobs).toHaveLength(5);
    expect(l.top_logprobs.slice(1).every((t) => t !== null && Object.keys(t).length === 1)).toBe(true);
  });
});

describe('what SUPPORT says is refused', () => {
  const bodies = { chat: GREEDY, completions: { prompt: 'a b', max_tokens: 2 } };
  const refused: [string, string, unknown][] = [];
  for (const key of ['chat', 'completions'] as const) {
    for (const [param, what] of Object.entries(SUPPORT[key])) {
      if (what === 'refused') refused.push([key, param, 'x']);
      if (what === '1 only') refused.push([key, param, 2]);
    }
  }
  it.each(refused)('%s %s (%p) is a 400 naming it', async (key, param, value) => {
    const r = await post(key === 'chat' ? '/v1/chat/completions' : '/v1/completions', { ...bodies[key as 'chat'], [param]: value });
    expect([r.status, r.body.error.param]).toEqual([400, param]);
  });

  it('logprobs and echo with stream are refused by name', async () => {
    const chat = await post('/v1/chat/completions', { ...GREEDY, stream: true, logprobs: true });
    expect([chat.status, chat.body.error.param]).toEqual([400, 'logprobs']);
    const echo = await post('/v1/completions', { prompt: 'a', stream: true, echo: true, logprobs: 1 });
    expect([echo.status, echo.body.error.param]).toEqual([400, 'echo']);
  });
});
