import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, post, setupFleet, sleep, type Upstream } from './testing.js';

afterEach(closeAll);

/**
 * A fake engine with a simulated prefix cache: blocks of 64 characters (16 "tokens" of 4
 * characters) in an LRU of `capacity` tokens, one prefill at a time at `rate` tokens/s,
 * reporting `cached_tokens` and its capacity as llmgw's engines do. `stats` counts what
 * it served and the longest prefill queue a request found on arrival.
 */
function cachingEngine({ capacity = 40_000, rate = 100_000, fail = () => false }: { capacity?: number; rate?: number; fail?: () => boolean } = {}) {
  const lru = new Map<string, true>();
  const stats = { served: 0, prompt: 0, cached: 0, maxQueue: 0 };
  let queue = 0;
  let prefill: Promise<unknown> = Promise.resolve();
  const handler: Upstream = (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (fail()) {
        res.writeHead(500).end('down');
        return;
      }
      const { messages, stream } = JSON.parse(body) as { messages: { content: string }[]; stream?: boolean };
      const text = messages.map((m) => m.content).join('\n');
      const blocks = Math.floor(text.length / 64);
      let hit = 0;
      while (hit < blocks && lru.has(text.slice(0, (hit + 1) * 64))) hit++;
      for (let b = 1; b <= blocks; b++) {
        const key = text.slice(0, b * 64);
        lru.delete(key);
        lru.set(key, true);
      }
      while (lru.size > capacity / 16) lru.delete(lru.keys().next().value!);
      const prompt = Math.ceil(text.length / 4);
      const cached = hit * 16;
      stats.maxQueue = Math.max(stats.maxQueue, queue);
      queue++;
      prefill = prefill.then(() => sleep(((prompt - cached) / rate) * 1000));
      void prefill.then(() => {
        queue--;
        stats.served++;
        stats.prompt += prompt;
        stats.cached += cached;
        const usage = { prompt_tokens: prompt, completion_tokens: 1, prompt_tokens_details: { cached_tokens: cached } };
        const headers = { 'x-llmgw-prefix-cache-tokens': String(capacity) };
        if (stream) {
          res.writeHead(200, { ...headers, 'content-type': 'text/event-stream' });
          res.end(`data: {"choices":[{"delta":{"content":"ok"}}]}\n\ndata: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`);
        } else {
          res.writeHead(200, { ...headers, 'content-type': 'application/json' });
          res.end(JSON.stringify({ id: 'c', choices: [{ message: { role: 'assistant', content: 'ok' } }], usage }));
        }
      });
    });
  };
  return { handler, stats };
}

const system = (g: number) => `You are assistant number ${g}. Answer in one short sentence. `.repeat(120); // ~7,000 chars
const chat = (g: number, q: string, extra: Record<string, unknown> = {}) => ({
  model: 'm',
  messages: [
    { role: 'system', content: system(g) },
    { role: 'user', content: q },
  ],
  ...extra,
});

describe('cache-aware routing through the gateway', () => {
  it('keeps a group of prompts on the replica that cached it, and the engines report it cached', async () => {
    const engines = [cachingEngine(), cachingEngine(), cachingEngine()];
    const { url, secret } = await setupFleet(engines.map((e) => e.handler));
    const replicas = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const r = await post(url, secret, chat(1, `question ${i}`, i % 2 ? { stream: true } : {}));
      expect(r.status).toBe(200);
      replicas.add(String(r.headers['x-llmgw-replica']));
    }
    expect(replicas.size).toBe(1);
    const all = engines.reduce((a, e) => ({ prompt: a.prompt + e.stats.prompt, cached: a.cached + e.stats.cached }), { prompt: 0, cached: 0 });
    expect(all.cached / all.prompt).toBeGreaterThan(0.8);
  });

  it('routes a model with routing: least-loaded as before, spreading one prompt over every replica', async () => {
    const engines = [cachingEngine(), cachingEngine(), cachingEngine()];
    const { url, secret } = await setupFleet(
      engines.map((e) => e.handler),
      { routing: 'least-loaded' },
    );
    const replicas = new Set<string>();
    for (let i = 0; i < 30; i++) replicas.add(String((await post(url, secret, chat(1, `q${i}`))).headers['x-llmgw-replica']));
    expect(replicas.size).toBe(3);
  });

  it('drops the affinity of a replica that stops serving at once, and no request fails', async () => {
    const engines = [cachingEngine(), cachingEngine()];
    const { url, secret, ready, changed } = await setupFleet(engines.map((e) => e.handler));
    const first = String((await post(url, secret, chat(1, 'a'))).headers['x-llmgw-replica']);
    const other = first === 'r-1' ? 'r-2' : 'r-1';
    // It leaves the routes (stopped, draining, its node silent).
    ready.delete(first);
    changed();
    const r = await post(url, secret, chat(1, 'b'));
    expect(r.status).toBe(200);
    expect(r.headers['x-llmgw-replica']).toBe(other);
    // Back, with its cache gone: the group stays where it is cached now.
    ready.add(first);
    changed();
    expect((await post(url, secret, chat(1, 'c'))).headers['x-llmgw-replica']).toBe(other);
  });

  it('retries elsewhere when the replica holding the prompt fails, then routes around it', async () => {
    let down = false;
    const engines = [cachingEngine({ fail: () => down }), cachingEngine()];
    const { url, secret, metrics } = await setupFleet(engines.map((e) => e.handler));
    // Group 1 lands on r-1 when r-1 answers first; try groups until one does.
    let g = 0;
    while (String((await post(url, secret, chat(g, 'a'))).headers['x-llmgw-replica']) !== 'r-1') g++;
    down = true;
    for (let i = 0; i < 5; i++) {
      const r = await post(url, secret, chat(g, `q${i}`));
      expect(r.status).toBe(200);
      expect(r.headers['x-llmgw-replica']).toBe('r-2');
    }
    // One retry (the first request after it failed); then it is cooling down and skipped.
    expect((await metrics.retries.get()).values[0]?.value).toBe(1);
  });

  it('spreads one hot group over the replicas when one replica cannot keep up (the valve), every request served', async () => {
    // Each request has 1,000 uncached tokens of its own after the shared prefix: at 50,000
    // tokens/s a replica serves 50 a second; 150 requests arrive at about 100 a second.
    const engines = [cachingEngine({ rate: 50_000 }), cachingEngine({ rate: 50_000 }), cachingEngine({ rate: 50_000 })];
    const { url, secret, metrics } = await setupFleet(engines.map((e) => e.handler));
    const unique = (i: number) => `Request ${i}: `.padEnd(4000, `${i} `);
    const pending: Promise<{ status: number }>[] = [];
    for (let i = 0; i < 150; i++) {
      pending.push(post(url, secret, chat(7, unique(i))));
      await sleep(10);
    }
    const statuses = (await Promise.all(pending)).map((r) => r.status);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const served = engines.map((e) => e.stats.served).sort((a, b) => b - a);
    // More than one replica took a real share, and none built a queue like one replica alone would (~75).
    expect(served[0]).toBeLessThan(110);
    expect(served[1]).toBeGreaterThan(30);
    for (const e of engines) expect(e.stats.maxQueue).toBeLessThan(25);
    const { values } = await metrics.routingDecisions.get();
    expect(values.some((v) => v.labels.decision === 'broke_saturated' && v.value > 0)).toBe(true);
  });
});
