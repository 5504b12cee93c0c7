import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, ReplicaView } from '@llmgw/shared';
import { bins, cleanup, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Journey: tools nobody here wrote work unchanged against the gateway on the built-in
 * engine with a generated GGUF — the official `openai` SDK with the parameters agents and
 * harnesses send, and what guidellm and lm-eval send, request for request.
 */

let server: ServerProc;
let client: OpenAI;
let secret = '';

beforeAll(async () => {
  const dir = tmpDir('llmgw-clients-');
  const model = path.join(dir, 'tiny.gguf');
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', model, '--seed', '7']);
  const catalog = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(
    catalog,
    `models:\n  - name: tiny\n    source: ${model}\n    profiles:\n      - { name: cpu, engine: node-llama-cpp, startup_timeout_s: 120 }\n`,
  );
  server = await startServer({ catalog });
  startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
  await eventually(async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']))[0]?.state === 'ready', 90_000, 'tiny ready');
  secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
  client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Tell me about the sea.' }];
const greedy = { model: 'tiny', messages, max_tokens: 24, temperature: 0, seed: 1 };

async function text(extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}): Promise<string> {
  return (await client.chat.completions.create({ ...greedy, ...extra })).choices[0]!.message.content ?? '';
}

async function post(route: string, body: unknown): Promise<{ status: number; body: unknown; text: string }> {
  const res = await fetch(`${server.clientUrl}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const t = await res.text();
  return { status: res.status, text: t, body: res.headers.get('content-type')?.startsWith('application/json') ? (JSON.parse(t) as unknown) : undefined };
}

describe('the official openai SDK through the gateway on the built-in engine', () => {
  it('probes /health and retrieves the model', async () => {
    expect((await fetch(`${server.clientUrl}/health`)).status).toBe(200);
    expect(await client.models.retrieve('tiny')).toMatchObject({ id: 'tiny', object: 'model' });
  });

  it('frequency_penalty, presence_penalty and logit_bias each change the output', async () => {
    const plain = await text();
    expect(await text({ frequency_penalty: 2 })).not.toBe(plain);
    expect(await text({ presence_penalty: 2 })).not.toBe(plain);
    expect(await text({ logit_bias: { '42': 100 } })).not.toBe(plain);
  });

  it("gets OpenAI's 400 for what OpenAI refuses, from the gateway", async () => {
    const err = await client.chat.completions.create({ ...greedy, top_logprobs: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('top_logprobs');
  });

  it('a json_schema response_format returns JSON matching the schema', async () => {
    const schema = { type: 'object', properties: { colour: { enum: ['red', 'green', 'blue'] }, ok: { type: 'boolean' } }, required: ['colour', 'ok'] };
    const out = await text({ max_tokens: 100, response_format: { type: 'json_schema', json_schema: { name: 'pick', schema } } });
    const value = JSON.parse(out) as { colour: string; ok: boolean };
    expect(['red', 'green', 'blue']).toContain(value.colour);
    expect(typeof value.ok).toBe('boolean');
  });

  const tools: OpenAI.ChatCompletionTool[] = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } } } } },
  ];

  it('a forced tool call returns tool_calls with JSON arguments, and a role: tool message is accepted', async () => {
    const r = await client.chat.completions.create({ ...greedy, max_tokens: 100, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const call = r.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('get_weather');
    expect(typeof (JSON.parse(call.function.arguments) as { city: unknown }).city).toBe('string');
    const next = await client.chat.completions.create({
      ...greedy,
      tools,
      messages: [...messages, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'Rain.' }],
    });
    expect(next.choices[0]!.message.role).toBe('assistant');
  });

  it('logprobs with top_logprobs: 2 return two alternatives per token', async () => {
    const r = await client.chat.completions.create({ ...greedy, max_tokens: 6, logprobs: true, top_logprobs: 2 });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content.length).toBeGreaterThan(0);
    for (const t of content) expect(t.top_logprobs).toHaveLength(2);
  });

  it('completions with echo and logprobs return the prompt logprobs', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: 'The sea is deep', max_tokens: 0, echo: true, logprobs: 1 });
    const lp = r.choices[0]!.logprobs!;
    expect(r.choices[0]!.text).toBe('The sea is deep');
    expect(lp.tokens!.join('')).toBe('The sea is deep');
    expect(lp.token_logprobs![0]).toBeNull();
    expect(lp.token_logprobs!.slice(1).every((x) => typeof x === 'number' && x <= 0)).toBe(true);
  });

  it('responses.create returns output_text, streamed and not', async () => {
    const ask = { model: 'tiny', instructions: 'Be brief.', input: 'Hello', max_output_tokens: 16, temperature: 0 };
    const r = await client.responses.create(ask);
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBeGreaterThan(0);
    const stream = await client.responses.create({ ...ask, stream: true });
    let deltas = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') deltas += ev.delta;
      if (ev.type === 'response.completed' || ev.type === 'response.incomplete') done = ev.response;
    }
    expect(deltas).toBe(r.output_text);
    expect(done!.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: deltas }] });
    const s = client.responses.stream(ask);
    expect((await s.finalResponse()).output_text).toBe(r.output_text);
  });
});

describe('what benchmark and evaluation harnesses send', () => {
  it("guidellm's backend validation and its streamed requests", async () => {
    // validate(): GET {target}/health, with /v1 stripped from the target.
    expect((await fetch(`${server.clientUrl}/health`)).status).toBe(200);
    expect((await fetch(`${server.clientUrl}/v1/models`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
    const r = await post('/v1/chat/completions', {
      model: 'tiny',
      messages: [{ role: 'user', content: 'benchmark prompt' }],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 8,
      max_tokens: 8,
    });
    expect(r.status).toBe(200);
    const events = r.text.split('\n\n').filter((e) => e.startsWith('data: {'));
    const usage = (JSON.parse(events.at(-1)!.slice(6)) as { usage: { completion_tokens: number } }).usage;
    expect(usage.completion_tokens).toBe(8);
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it("lm-eval's loglikelihood request: token-id prompts, echo, logprobs 1, one token", async () => {
    const prompts = [
      [5, 17, 33, 60, 71],
      [9, 12, 101],
    ];
    const r = await post('/v1/completions', { model: 'tiny', prompt: prompts, temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
    expect(r.status).toBe(200);
    type Choice = { index: number; logprobs: { token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[] } };
    const choices = (r.body as { choices: Choice[] }).choices.sort((a, b) => a.index - b.index);
    for (const [i, c] of choices.entries()) {
      const ctxlen = prompts[i]!.length - 1;
      // lm-eval: sum(token_logprobs[ctxlen:-1]) and, for is_greedy, each token against max(top.values()).
      const tokens = c.logprobs.token_logprobs.slice(ctxlen, -1);
      const tops = c.logprobs.top_logprobs.slice(ctxlen, -1);
      expect(tokens).toHaveLength(1);
      expect(Number.isFinite(tokens.reduce<number>((a, b) => a + b!, 0))).toBe(true);
      expect(Object.values(tops[0]!).length).toBe(1);
    }
  });
});
