import { afterEach, describe, expect, it } from '@jest/globals';
import { DomainError } from '../errors.js';
import { PARAMETERS, validateParams } from './params.js';
import { stripNullUsage } from './sse.js';
import { closeAll, post, reply, setup, sse } from './testing.js';

afterEach(closeAll);

const chat = (extra: Record<string, unknown>) => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });
const refusal = (path: string, body: Record<string, unknown>) => {
  try {
    validateParams(path, body);
  } catch (e) {
    if (e instanceof DomainError) return { param: e.field, message: e.message };
    throw e;
  }
  return undefined;
};
const CHAT = '/v1/chat/completions';

describe('the parameter table', () => {
  it('accepts what OpenAI accepts, nulls as not given, and extras it does not know', () => {
    expect(
      refusal(CHAT, chat({ temperature: 0.5, stop: ['a', 'b', 'c', 'd'], logprobs: true, top_logprobs: 2, seed: -3, top_k: 5, min_p: 0.1 })),
    ).toBeUndefined();
    expect(refusal(CHAT, chat({ temperature: null, stream_options: null, tool_choice: null }))).toBeUndefined();
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
    expect(refusal(CHAT, chat({ tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } }))).toBeUndefined();
    expect(refusal('/v1/completions', { model: 'm', prompt: 'a b', echo: true, logprobs: 1, max_tokens: 0 })).toBeUndefined();
    expect(refusal('/v1/responses', { model: 'm', input: 'hi', stream: true, stream_options: { include_usage: true } })).toBeUndefined();
  });

  it.each([
    ['stream_options without stream', chat({ stream_options: { include_usage: true } }), 'stream_options', "only allowed when 'stream' is enabled"],
    ['tool_choice without tools', chat({ tool_choice: 'auto' }), 'tool_choice', "only allowed when 'tools' are specified"],
    ['top_logprobs without logprobs', chat({ top_logprobs: 2 }), 'top_logprobs', "'logprobs' must be set to true"],
    ['five stop sequences', chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'stop', 'Expected an array with maximum length 4'],
    ['a temperature over 2', chat({ temperature: 3 }), 'temperature', 'Expected a value <= 2, but got 3 instead'],
    ['a string where a number goes', chat({ top_p: '1' }), 'top_p', "Invalid type for 'top_p': expected a decimal, but got a string instead"],
    ['a logit_bias key that is not a token id', chat({ logit_bias: { hello: 1 } }), 'logit_bias', 'non-negative integers'],
    ['a logit_bias over 100', chat({ logit_bias: { '5': 101 } }), 'logit_bias', 'Expected a value <= 100'],
    ['no messages', { model: 'm' }, 'messages', "Missing required parameter: 'messages'"],
    ['empty messages', chat({ messages: [] }), 'messages', 'empty array'],
    ['a message with an unknown role', chat({ messages: [{ role: 'robot', content: 'x' }] }), 'messages', "Invalid value for 'messages[0].role'"],
    ['a tool message without its call id', chat({ messages: [{ role: 'tool', content: 'x' }] }), 'messages', "'messages[0].tool_call_id'"],
    [
      'a tool_choice naming no tool',
      chat({ tools: [{ type: 'function', function: { name: 'a' } }], tool_choice: { type: 'function', function: { name: 'b' } } }),
      'tool_choice',
      "no function named 'b'",
    ],
    [
      'a json_schema format without its name',
      chat({ response_format: { type: 'json_schema', json_schema: { schema: {} } } }),
      'response_format',
      "'response_format.json_schema.name'",
    ],
  ])('refuses %s', (_what, body, param, message) => {
    const r = refusal(CHAT, body);
    expect(r?.param).toBe(param);
    expect(r?.message).toContain(message);
  });

  it('allows max_tokens 0 on completions only with echo (the prompt logprobs lm-eval asks for)', () => {
    expect(refusal('/v1/completions', { model: 'm', prompt: 'a', max_tokens: 0 })?.param).toBe('max_tokens');
    expect(refusal(CHAT, chat({ max_tokens: 0 }))?.param).toBe('max_tokens');
    expect(refusal('/v1/completions', { model: 'm', prompt: 'a', logprobs: 6 })?.param).toBe('logprobs');
  });

  it('checks the Responses API its own way: flat tools, input items, max_output_tokens >= 16', () => {
    expect(refusal('/v1/responses', { model: 'm', input: [{ type: 'function_call_output', output: 'x' }] })?.message).toContain("'input[0].call_id'");
    expect(refusal('/v1/responses', { model: 'm', input: 'x', max_output_tokens: 8 })?.param).toBe('max_output_tokens');
    expect(refusal('/v1/responses', { model: 'm', input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: 'required' })).toBeUndefined();
    expect(refusal('/v1/responses', { model: 'm', input: 'x', text: { format: { type: 'json_schema', schema: {} } } })?.message).toContain(
      "'text.format.name'",
    );
  });

  it('refuses content parts that are not objects with a type, or whose text is not a string, naming the part (a 400, not a crash)', () => {
    const msg = (content: unknown) => refusal('/v1/responses', { model: 'm', input: [{ role: 'user', content }] })?.message;
    expect(msg([null])).toContain("'input[0].content[0]'");
    expect(msg([7])).toContain("'input[0].content[0]'");
    expect(msg([{ text: 'x' }])).toContain("'input[0].content[0].type'");
    expect(
      msg([
        { type: 'input_text', text: 'a' },
        { type: 'input_text', text: 3 },
      ]),
    ).toContain("'input[0].content[1].text'");
    expect(msg([{ type: 'input_image', image_url: {} }])).toContain("'input[0].content[0].image_url'");
    expect(msg([{ type: 'input_text', text: 'fine' }])).toBeUndefined();
  });
});

describe('through the gateway', () => {
  it("answers a request OpenAI would refuse with OpenAI's 400, without calling the engine", async () => {
    let called = 0;
    const { url, secret } = await setup((req, res) => {
      called++;
      res.end();
    });
    const r = await post(url, secret, chat({ tool_choice: 'none' }));
    expect(r.status).toBe(400);
    expect(reply(r.text).error).toMatchObject({ param: 'tool_choice', code: 'invalid_value' });
    expect((JSON.parse(r.text) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    expect(called).toBe(0);
  });

  it('leaves no usage field on the chunks of a client that did not ask for usage, and keeps it for one that did', async () => {
    const chunk = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n';
    const last = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n';
    const { url, secret } = await setup(sse([chunk, chunk + last, 'data: [DONE]\n\n']));
    const plain = await post(url, secret, chat({ stream: true }));
    expect(plain.text).toBe(`${chunk.replace(',"usage":null', '').repeat(2)}data: [DONE]\n\n`);
    const asked = await post(url, secret, chat({ stream: true, stream_options: { include_usage: true } }));
    expect(asked.text).toBe(`${chunk}${chunk}${last}data: [DONE]\n\n`);
  });

  it('strips the mark wherever the engine put it in the object, and only the key', () => {
    const strip = (s: string) => stripNullUsage(Buffer.from(s)).toString();
    expect(strip('{"usage":null,"id":"a"}')).toBe('{"id":"a"}');
    expect(strip('{"id":"a","usage":null}')).toBe('{"id":"a"}');
    expect(strip('{"content":"\\"usage\\":null"}')).toBe('{"content":"\\"usage\\":null"}');
  });
});

describe("the README's parameter table", () => {
  it('lists exactly the parameters the gateway checks, per endpoint, and marks the others as passing through', async () => {
    const { readFileSync } = await import('node:fs');
    const readme = readFileSync(new URL('../../../../README.md', import.meta.url), 'utf8');
    const rows = readme
      .slice(readme.indexOf('<!-- parameters:'))
      .split('\n')
      .filter((l) => /^\| `\/v1\//.test(l))
      .map((l) => l.split('|').map((c) => c.trim()));
    expect(rows.length).toBeGreaterThan(0);
    for (const [path, params] of Object.entries(PARAMETERS)) {
      const listed = rows.filter((r) => r[1] === `\`${path}\``);
      const checked = listed.filter((r) => r[3] !== 'passes through').map((r) => r[2]!.replaceAll('`', ''));
      expect(checked.sort()).toEqual(Object.keys(params).sort());
    }
  });
});
