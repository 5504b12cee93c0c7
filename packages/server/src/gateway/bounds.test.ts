import http from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { LoadedCatalog, type CatalogModel } from '../catalog/loaded.js';
import { closeAll, json, post, reply, setup } from './testing.js';

// Bounded work per request: a client's input costs the gateway little more than its
// size to read, whatever is in it, and a client over its limits costs less still.

afterEach(closeAll);

const ok = json(200, '{"id":"ok","choices":[]}');
const names = ['llama-3.1-8b-instruct', 'qwen2.5-coder-14b-instruct', 'mistral-small-24b-instruct', 'gemma-2-27b-it'];
const catalog = new LoadedCatalog(
  'c.yaml',
  names.map((name) => ({ name, aliases: [`${name}-alias`] }) as unknown as CatalogModel),
);

/** POSTs `body` without waiting on the answer's body; resolves with the status when the answer is complete. */
function send(url: string, secret: string, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/v1/chat/completions`,
      { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('model names', () => {
  it('refuses a name over 256 characters before any lookup, echoing only its start', async () => {
    const { url, secret, lookups, keys, store } = await setup(ok, {}, 1, undefined, catalog);
    const r = await post(url, secret, { model: 'x'.repeat(257), messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(400);
    const e = reply(r.text).error;
    expect(e.param).toBe('model');
    expect(e.message).toBe(`model \`${'x'.repeat(64)}…\` is longer than 256 characters`);
    expect(lookups).toEqual({ resolve: 0, suggest: 0 });
    await keys.flushUsage();
    expect(store.usage).toEqual([]);
    // 256 is still a name (unknown here), looked up and suggested for as before.
    expect((await post(url, secret, { model: 'y'.repeat(256), messages: [{ role: 'user', content: 'hi' }] })).status).toBe(404);
    expect(lookups).toEqual({ resolve: 1, suggest: 1 });
  });

  it('echoes only a bounded prefix of an unknown model name', async () => {
    const { url, secret } = await setup(ok, {}, 1, undefined, catalog);
    const r = await post(url, secret, { model: 'z'.repeat(200), messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(404);
    expect(reply(r.text).error.message).toBe(`The model \`${'z'.repeat(64)}…\` does not exist`);
  });

  it('keeps /healthz answering while 10 MB model names are refused, and never looks them up', async () => {
    // Before the cap, the suggestions for four 10 MB names held the event loop for many
    // seconds (about 0.5 s per MB each), and /healthz waited behind them. What is tested is
    // the cause, not a wall-clock bound a loaded machine can break: no lookup or suggestion
    // is made for a name past the cap, so no work grows with the name past reading it.
    const { url, secret, lookups } = await setup(ok, { maxBodyBytes: 16 * 1024 * 1024 }, 1, undefined, catalog);
    const big = Buffer.from(JSON.stringify({ model: 'q'.repeat(10 * 1024 * 1024), messages: [{ role: 'user', content: 'hi' }] }));
    const refused = Array.from({ length: 4 }, () => send(url, secret, big));
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    const answers = await Promise.all(refused);
    expect(answers.map((a) => a.status)).toEqual([400, 400, 400, 400]);
    expect(answers[0]!.text.length).toBeLessThan(500);
    expect(lookups).toEqual({ resolve: 0, suggest: 0 });
  });
});

describe('admission comes first', () => {
  it('refuses a key over its per-minute limit before reading or resolving the body', async () => {
    const { url, keys, lookups } = await setup(ok);
    const { secret } = await keys.create({ name: 'limited', rpm: 1 }, (n) => n);
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    expect(lookups.resolve).toBe(1);
    const r = await post(url, secret, { model: 'nope', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(429);
    expect((await post(url, secret, '{not json')).status).toBe(429);
    expect(lookups.resolve).toBe(1);
  });

  it('gives the concurrency slot back when the body is refused', async () => {
    const { url, keys } = await setup(ok);
    const { secret } = await keys.create({ name: 'one', max_concurrent: 1 }, (n) => n);
    expect((await post(url, secret, '{not json')).status).toBe(400);
    expect((await post(url, secret, { model: 'nope' })).status).toBe(404);
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
  });
});
