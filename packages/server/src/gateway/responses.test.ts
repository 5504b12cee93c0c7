import type http from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { usageTotals } from '../store/testing.js';
import { closeAll, reply, setup, sleep, type Upstream } from './testing.js';

afterEach(closeAll);

type Obj = Record<string, unknown>;

/** An engine that records what it was sent and answers with `answer` for the path it got. */
function engine(answer: (path: string, body: Obj, res: http.ServerResponse) => void | Promise<void>): {
  upstream: Upstream;
  seen: { path: string; body: Obj }[];
} {
  const seen: { path: string; body: Obj }[] = [];
  const upstream: Upstream = (req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(text) as Obj;
      seen.push({ path: req.url ?? '', body });
      void answer(req.url ?? '', body, res);
    });
  };
  return { upstream, seen };
}

async function responses(url: string, secret: string, body: Obj): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', ...body }),
  });
  return { status: res.status, text: await res.text() };
}

const chatReply = (message: Obj, finish = 'stop') =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, prompt_tokens_details: { cached_tokens: 2 } },
  });

const events = (text: string) =>
  text
    .split('\n\n')
    .filter((e) => e.includes('data: '))
    .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)) as Obj & { type: string });

describe('/v1/responses translated to chat completions', () => {
  it('sends instructions and input as chat messages and answers a response with output_text, its usage counted', async () => {
    const e = engine((_p, _b, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(chatReply({ content: 'Hello there' }));
    });
    const { url, secret, keys, store } = await setup(e.upstream);
    const r = await responses(url, secret, { instructions: 'Be brief.', input: 'Hi', max_output_tokens: 20, temperature: 0.5 });
    expect(r.status).toBe(200);
    expect(e.seen[0]).toEqual({
      path: '/v1/chat/completions',
      body: {
        model: 'm',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        max_tokens: 20,
        temperature: 0.5,
      },
    });
    const resp = JSON.parse(r.text) as Obj;
    expect(resp).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'm',
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello there', annotations: [] }] }],
      usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10, input_tokens_details: { cached_tokens: 2 } },
    });
    expect(resp.id).toMatch(/^resp_/);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, promptTokens: 7, completionTokens: 3 })]);
  });

  it('answers 502 to an engine 200 that is not JSON, and counts it as an error', async () => {
    const e = engine((_p, _b, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('<html>oops</html>');
    });
    const { url, secret, keys, store, metrics } = await setup(e.upstream);
    const r = await responses(url, secret, { input: 'Hi' });
    expect(r.status).toBe(502);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1 })]);
    expect(await metrics.registry.metrics()).toMatch(/llmgw_requests_total\{[^}]*status="502"[^}]*\} 1/);
  });

  it('turns function tools, tool choice, function calls and their outputs into chat, and tool_calls into function_call items', async () => {
    const e = engine((_p, _b, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        chatReply(
          { content: null, tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
          'tool_calls',
        ),
      );
    });
    const { url, secret } = await setup(e.upstream);
    const tools = [
      { type: 'function', name: 'weather', description: 'w', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true },
    ];
    const input = [
      { role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] },
      { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Bergen"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'rain' },
    ];
    const r = await responses(url, secret, {
      input,
      tools,
      tool_choice: { type: 'function', name: 'weather' },
      text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object' } } },
    });
    expect(r.status).toBe(200);
    expect(e.seen[0]!.body).toMatchObject({
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Bergen"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'rain' },
      ],
      tools: [{ type: 'function', function: { name: 'weather', description: 'w', parameters: tools[0]!.parameters, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } },
    });
    expect((JSON.parse(r.text) as Obj).output).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_9', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' },
    ]);
  });

  it("streams the Responses API's events from chat chunks, ending with response.completed and its usage, counted once", async () => {
    const chunk = (delta: Obj, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], usage: null })}\n\n`;
    const e = engine(async (_p, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const piece of [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: 'Hel' }),
        chunk({ content: 'lo' }),
        chunk({}, 'length'),
        'data: {"id":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n',
        'data: [DONE]\n\n',
      ]) {
        res.write(piece);
        await sleep(5);
      }
      res.end();
    });
    const { url, secret, keys, store } = await setup(e.upstream);
    const r = await responses(url, secret, { input: 'Hi', stream: true });
    expect(e.seen[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const got = events(r.text);
    expect(got.map((x) => x.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(got.map((x) => x.sequence_number)).toEqual(got.map((_x, i) => i));
    expect(got[6]).toMatchObject({ text: 'Hello' });
    expect(got.at(-1)!.response).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ type: 'message', content: [{ type: 'output_text', text: 'Hello' }] }],
      usage: { input_tokens: 4, output_tokens: 2 },
    });
    expect(r.text).not.toContain('[DONE]');
    expect(r.text).not.toContain('"choices"');
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, promptTokens: 4, completionTokens: 2 })]);
  });

  it('refuses what needs a stored response, naming the field', async () => {
    const { url, secret } = await setup(engine(() => {}).upstream);
    for (const [field, body] of [
      ['previous_response_id', { input: 'x', previous_response_id: 'resp_1' }],
      ['store', { input: 'x', store: true }],
      ['input', { input: 5 }],
    ] as const) {
      const r = await responses(url, secret, body);
      expect([r.status, reply(r.text).error.param]).toEqual([400, field]);
    }
  });

  it('refuses them as the request is read, before it waits for a replica (review of issue 29)', async () => {
    const e = engine(() => {});
    const { url, secret } = await setup(e.upstream, {}, 0);
    const r = await responses(url, secret, { input: 'x', background: true });
    expect([r.status, reply(r.text).error.param]).toEqual([400, 'background']);
    expect(e.seen).toEqual([]);
  });
});

describe('/v1/responses passed through', () => {
  it('sends an engine that serves the Responses API the request as it came, and counts the usage in its reply and its stream', async () => {
    const done = { type: 'response.completed', sequence_number: 1, response: { id: 'resp_v', usage: { input_tokens: 5, output_tokens: 6, total_tokens: 11 } } };
    const e = engine((_p, body, res) => {
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(
          `event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"usage":null}}\n\nevent: response.completed\ndata: ${JSON.stringify(done)}\n\n`,
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'resp_v', object: 'response', output: [], usage: { input_tokens: 5, output_tokens: 6, total_tokens: 11 } }));
    });
    const { url, secret, keys, store, model } = await setup(e.upstream);
    model.profiles = [{ name: 'gpu', engine: 'vllm' }];
    const r = await responses(url, secret, { input: 'Hi', store: true });
    expect(e.seen[0]).toEqual({ path: '/v1/responses', body: { model: 'm', input: 'Hi', store: true } });
    expect((JSON.parse(r.text) as Obj).id).toBe('resp_v');
    const s = await responses(url, secret, { input: 'Hi', stream: true });
    expect(e.seen[1]!.body).toEqual({ model: 'm', input: 'Hi', stream: true });
    expect(events(s.text).map((x) => x.type)).toEqual(['response.created', 'response.completed']);
    expect(s.text).toContain('"usage":null');
    await keys.flushUsage();
    expect(usageTotals(store.usage)).toEqual([expect.objectContaining({ requests: 2, promptTokens: 10, completionTokens: 12 })]);
  });
});
