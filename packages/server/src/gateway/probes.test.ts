import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, reply, setup, setupFleet, type Upstream } from './testing.js';

afterEach(closeAll);

const engine: Upstream = (_req, res) => res.end('{}');

async function get(url: string, path: string, secret?: string) {
  const r = await fetch(`${url}${path}`, { headers: secret ? { authorization: `Bearer ${secret}` } : {} });
  return { status: r.status, text: await r.text() };
}

describe('client port probes', () => {
  it('answers /health and /healthz without a key, as engines and guidellm expect', async () => {
    const { url } = await setup(engine);
    for (const path of ['/health', '/healthz']) {
      const r = await get(url, path);
      expect({ path, status: r.status, body: JSON.parse(r.text) as unknown }).toEqual({ path, status: 200, body: { status: 'ok' } });
    }
  });

  it('serves GET /v1/models/{id} (models.retrieve) with the entry /v1/models lists', async () => {
    const { url, secret } = await setup(engine);
    const list = JSON.parse((await get(url, '/v1/models', secret)).text) as { data: unknown[] };
    const one = await get(url, '/v1/models/m', secret);
    expect(one.status).toBe(200);
    expect(JSON.parse(one.text)).toEqual(list.data[0]);
    expect(JSON.parse(one.text)).toMatchObject({ id: 'm', object: 'model', owned_by: 'llmgw' });
  });

  it('answers 404 model_not_found in OpenAI shape for an unknown model or one the key may not see', async () => {
    const { url, secret, keys } = await setup(engine);
    const { secret: narrow } = await keys.create({ name: 'narrow', models: ['other'] }, (n) => n);
    for (const [path, key] of [
      ['/v1/models/nosuch', secret],
      ['/v1/models/m', narrow],
      ['/v1/models/%zz', secret],
    ] as const) {
      const r = await get(url, path, key);
      expect({ path, status: r.status }).toEqual({ path, status: 404 });
      expect(reply(r.text).error).toMatchObject({ code: 'model_not_found', param: 'model' });
    }
  });

  it('lists LoRA adapters as models with their base as parent, each allowed to a key by its own name', async () => {
    const { url, secret, keys } = await setupFleet([engine], {
      adapters: [
        { name: 'sql-lora', source: '/m/sql.gguf' },
        { name: 'chat-lora', source: '/m/chat.gguf' },
      ],
    });
    const ids = (text: string) => (JSON.parse(text) as { data: Array<{ id: string; parent?: string }> }).data.map((e) => [e.id, e.parent ?? null]);
    expect(ids((await get(url, '/v1/models', secret)).text)).toEqual([
      ['m', null],
      ['sql-lora', 'm'],
      ['chat-lora', 'm'],
    ]);
    expect(JSON.parse((await get(url, '/v1/models/sql-lora', secret)).text)).toMatchObject({ id: 'sql-lora', parent: 'm' });
    const { secret: sqlOnly } = await keys.create({ name: 'sql-team', models: ['sql-lora'] }, (n) => n);
    expect(ids((await get(url, '/v1/models', sqlOnly)).text)).toEqual([['sql-lora', 'm']]);
    expect((await get(url, '/v1/models/chat-lora', sqlOnly)).status).toBe(404);
  });

  it('still needs a key for /v1/models/{id}', async () => {
    const { url } = await setup(engine);
    expect((await get(url, '/v1/models/m')).status).toBe(401);
  });

  it('names the endpoint a near-miss path meant', async () => {
    const { url, secret } = await setup(engine);
    const r = await fetch(`${url}/v1/chat/completion`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' });
    expect(r.status).toBe(404);
    expect(reply(await r.text()).error.message).toBe('no route POST /v1/chat/completion; did you mean /v1/chat/completions?');
    const bare = await fetch(`${url}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' });
    expect(reply(await bare.text()).error.message).toContain('did you mean /v1/chat/completions?');
    const other = await fetch(`${url}/v2/nothing`, { headers: { authorization: `Bearer ${secret}` } });
    expect(reply(await other.text()).error.message).toBe('no route GET /v2/nothing');
  });
});
