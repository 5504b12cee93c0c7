import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { Model } from '@llmgw/shared';
import type { RouteTarget } from '../controller/controller.js';
import { payloadFor, servesAdapter } from './engine-adapters.js';
import type { ClientRequest } from './request.js';
import { closeAll, post, setupFleet, type Upstream } from './testing.js';

afterEach(closeAll);

const base: Model = { name: 'm', source: '/m.gguf', profiles: [{ name: 'cpu', engine: 'llama.cpp' }] };
const request = (adapter?: string): ClientRequest => {
  const body = { model: adapter ?? 'm', messages: [{ role: 'user', content: 'q' }] };
  return {
    path: '/v1/chat/completions',
    raw: Buffer.from(JSON.stringify(body)),
    body,
    requested: body.model,
    model: base,
    stream: false,
    clientWantsUsage: false,
    ...(adapter ? { adapter } : {}),
  };
};
const target = (engine: string, adapters?: string[]): RouteTarget => ({
  replicaId: 'r',
  endpoint: 'http://e.invalid',
  apiKey: 'k',
  engine,
  ...(adapters ? { adapters } : {}),
});

describe('payloadFor', () => {
  it("gives llama-server the adapter's index in the replica's --lora order at scale 1, and the base's name", () => {
    const r = request('chat');
    const out = JSON.parse(String(payloadFor(r, 'm', target('llama.cpp', ['sql', 'chat']), r.raw))) as Record<string, unknown>;
    expect(out).toEqual({ model: 'm', messages: [{ role: 'user', content: 'q' }], lora: [{ id: 1, scale: 1 }] });
  });

  it('leaves the body alone for the base model, for engines that take the adapter by name, and on a fallback', () => {
    expect(payloadFor(request(), 'm', target('llama.cpp', ['sql']), 'same')).toBe('same');
    for (const engine of ['vllm', 'sglang', 'node-llama-cpp', 'command']) expect(payloadFor(request('sql'), 'm', target(engine, ['sql']), 'same')).toBe('same');
    expect(payloadFor(request('sql'), 'other', target('llama.cpp', ['sql']), 'same')).toBe('same');
  });
});

describe('servesAdapter', () => {
  it('is false only for a replica whose spec does not list the adapter', () => {
    expect(servesAdapter(target('vllm', ['sql']), 'sql')).toBe(true);
    expect(servesAdapter(target('vllm', []), 'sql')).toBe(false);
    expect(servesAdapter(target('vllm'), 'sql')).toBe(true);
    expect(servesAdapter(target('vllm', []), undefined)).toBe(true);
  });
});

/** An engine that answers with its number and the body it was sent, as JSON text. */
const engine =
  (n: number): Upstream =>
  (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify({ n, body: JSON.parse(body) as unknown }) } }],
        }),
      );
    });
  };
const sent = (text: string) =>
  JSON.parse((JSON.parse(text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content) as {
    n: number;
    body: Record<string, unknown>;
  };

describe('a LoRA adapter on llama-server replicas, through the gateway', () => {
  const adapters = [
    { name: 'sql', source: '/m/sql.gguf' },
    { name: 'chat', source: '/m/chat.gguf' },
  ];

  it('selects the adapter per request by its index, only on replicas started with it', async () => {
    // r-2 is of an earlier revision, started without adapters: it must not get adapter requests.
    const { url, secret } = await setupFleet([engine(1), engine(2)], { ...base, adapters }, {}, [
      { engine: 'llama.cpp', adapters: ['sql', 'chat'] },
      { engine: 'llama.cpp', adapters: [] },
    ]);
    for (const [adapter, id] of [
      ['chat', 1],
      ['sql', 0],
      ['chat', 1],
    ] as const) {
      const r = await post(url, secret, { model: adapter, messages: [{ role: 'user', content: 'q' }] });
      expect(r.status).toBe(200);
      expect(sent(r.text)).toEqual({ n: 1, body: { model: 'm', messages: [{ role: 'user', content: 'q' }], lora: [{ id, scale: 1 }] } });
    }
    const plain = sent((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] })).text);
    expect(plain.body.lora).toBeUndefined();
  });

  it('says so when no ready replica was started with the adapter', async () => {
    const { url, secret } = await setupFleet([engine(1)], { ...base, adapters }, {}, [{ engine: 'llama.cpp', adapters: [] }]);
    const r = await post(url, secret, { model: 'chat', messages: [{ role: 'user', content: 'q' }] });
    expect(r.status).toBe(503);
    expect(r.text).toContain('no ready replica was started with adapter chat');
  });

  it('keeps the adapter when a Responses request is translated to chat for an engine without /v1/responses', async () => {
    const { url, secret } = await setupFleet([engine(1)], { ...base, profiles: [{ name: 'cpu', engine: 'node-llama-cpp' }], adapters }, {}, [
      { engine: 'node-llama-cpp', adapters: ['sql', 'chat'] },
    ]);
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sql', input: 'q' }),
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as { output: Array<{ content: Array<{ text: string }> }> };
    expect((JSON.parse(out.output[0]!.content[0]!.text) as { body: { model: string } }).body.model).toBe('sql');
  });
});
