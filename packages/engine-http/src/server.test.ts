import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { InferenceBackend } from './backend.js';
import { EngineError } from './errors.js';
import { chatChunk, PREFIX_CACHE_TOKENS_HEADER } from './openai.js';
import { createEngineHttp } from './server.js';
import type { EngineHttp } from './server.js';

const lines: string[] = [];
let engine: EngineHttp;
let url = '';
const KEY = 'sk-engine';
const auth = { authorization: `Bearer ${KEY}` };

/** A backend whose answers are chosen by the request body, to drive every path of the layer. */
const fake: InferenceBackend = {
  model: () => ({ id: 'tiny', object: 'model' }),
  admit: (r) => {
    if (r.req.headers['x-drop'] === undefined) return true;
    r.drop();
    return false;
  },
  chatCompletions: (r, body) => {
    if (body.fail === 'refuse') throw new EngineError('context_length_exceeded', 'too long');
    if (body.fail === 'bug') throw new Error('boom');
    if (body.stream !== true) {
      r.json(200, { echo: body });
      return Promise.resolve();
    }
    const events = r.sse();
    const base = { id: 'c-1', created: 1, model: 'tiny' };
    events.send(chatChunk(base, { content: 'a' }, null, false));
    events.send(chatChunk(base, {}, 'stop', false));
    events.end();
    return Promise.resolve();
  },
  completions: () => Promise.reject(new Error('not used')),
  embeddings: () => Promise.reject(new Error('not used')),
};

function post(path: string, body: unknown, headers: Record<string, string> = auth): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

beforeAll(async () => {
  engine = createEngineHttp({
    program: 'fake-engine',
    servedName: 'tiny',
    apiKey: KEY,
    log: (line) => lines.push(line),
    headers: { 'x-engine': 'fake' },
    metrics: () => 'up 1\n',
  });
  await new Promise<void>((resolve) => engine.server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`;
});

afterAll(() => {
  engine.server.closeAllConnections();
  engine.server.close();
});

describe('before the model is loaded', () => {
  it('answers /health and /v1/* 503 in llama-server and OpenAI words, /metrics as usual', async () => {
    const health = await fetch(`${url}/health`);
    expect([health.status, await health.json()]).toEqual([503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }]);
    const models = await fetch(`${url}/v1/models`, { headers: auth });
    expect([models.status, await models.json()]).toEqual([
      503,
      { error: { message: 'Loading model', type: 'unavailable_error', param: null, code: 'model_loading' } },
    ]);
    expect(await (await fetch(`${url}/metrics`)).text()).toBe('up 1\n');
    expect(engine.isLoaded()).toBe(false);
    engine.setBackend(fake);
    expect(engine.isLoaded()).toBe(true);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });
});

describe('routing', () => {
  it('lists the model, and only under its own name', async () => {
    expect(await (await fetch(`${url}/v1/models`, { headers: auth })).json()).toEqual({ object: 'list', data: [{ id: 'tiny', object: 'model' }] });
    expect((await fetch(`${url}/v1/models/tiny`, { headers: auth })).status).toBe(200);
    const other = await fetch(`${url}/v1/models/other`, { headers: auth });
    expect([other.status, ((await other.json()) as { error: { code: string } }).error.code]).toEqual([404, 'model_not_found']);
  });

  it('answers a model path with a bad %-escape 404, not 500', async () => {
    const bad = await fetch(`${url}/v1/models/%E0%A4%A`, { headers: auth });
    expect([bad.status, ((await bad.json()) as { error: { code: string } }).error.code]).toEqual([404, 'model_not_found']);
  });

  it('answers unknown paths 404 and wrong methods 405 with Allow', async () => {
    expect((await fetch(`${url}/v2/x`)).status).toBe(404);
    expect((await post('/v1/nothing', {})).status).toBe(404);
    const get = await fetch(`${url}/v1/chat/completions`, { headers: auth });
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
    expect((await post('/health', {})).headers.get('allow')).toBe('GET, HEAD');
  });

  it('needs the engine key on /v1/* only', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: KEY }] as Array<Record<string, string>>) {
      const res = await post('/v1/chat/completions', { model: 'tiny' }, headers);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    }
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });

  it('sets its headers and echoes x-request-id', async () => {
    const res = await fetch(`${url}/health`, { headers: { 'x-request-id': 'req-7' } });
    expect([res.headers.get('x-engine'), res.headers.get('x-request-id')]).toEqual(['fake', 'req-7']);
  });
});

describe('requests and errors', () => {
  it('hands the parsed body to the backend', async () => {
    expect(await (await post('/v1/chat/completions', { a: 1 })).json()).toEqual({ echo: { a: 1 } });
  });

  it('refuses bodies that are not a JSON object', async () => {
    for (const body of ['{"a":', '[1]']) {
      const res = await post('/v1/chat/completions', body);
      expect([res.status, ((await res.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_json']);
    }
  });

  it('answers an EngineError with its status, anything else with 500 naming the program', async () => {
    const refused = await post('/v1/chat/completions', { fail: 'refuse' });
    expect([refused.status, await refused.json()]).toEqual([
      400,
      { error: { message: 'too long', type: 'invalid_request_error', param: null, code: 'context_length_exceeded' } },
    ]);
    const bug = await post('/v1/chat/completions', { fail: 'bug' });
    expect([bug.status, ((await bug.json()) as { error: { message: string } }).error.message]).toEqual([500, 'internal error in fake-engine: boom']);
    expect(lines.some((l) => l.startsWith('internal error on /v1/chat/completions: Error: boom'))).toBe(true);
  });

  it('lets the backend drop a request before its body is read', async () => {
    await expect(post('/v1/chat/completions', {}, { ...auth, 'x-drop': '1' })).rejects.toThrow();
  });

  it('streams events and [DONE]', async () => {
    const res = await post('/v1/chat/completions', { stream: true });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text();
    expect(
      text
        .split('\n\n')
        .filter(Boolean)
        .map((e) => e.slice(0, 6)),
    ).toEqual(['data: ', 'data: ', 'data: ']);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('names the prefix cache capacity on completions only, when the backend has one', async () => {
    expect((await post('/v1/chat/completions', {})).headers.get(PREFIX_CACHE_TOKENS_HEADER)).toBeNull();
    engine.setBackend({ ...fake, prefixCacheTokens: 4096, embeddings: (r) => Promise.resolve(r.json(200, {})) });
    try {
      expect((await post('/v1/chat/completions', {})).headers.get(PREFIX_CACHE_TOKENS_HEADER)).toBe('4096');
      expect((await post('/v1/embeddings', {})).headers.get(PREFIX_CACHE_TOKENS_HEADER)).toBeNull();
      expect((await fetch(`${url}/health`)).headers.get(PREFIX_CACHE_TOKENS_HEADER)).toBeNull();
    } finally {
      engine.setBackend(fake);
    }
  });

  it('logs one line per request, probes left out', () => {
    expect(lines.some((l) => /^POST \/v1\/chat\/completions 200 [\d.]+ms$/.test(l))).toBe(true);
    expect(lines.some((l) => l.includes('/health') || l.includes('/metrics'))).toBe(false);
  });
});
