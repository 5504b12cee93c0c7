import { once, EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, setupFleet, type Upstream } from './testing.js';

afterEach(closeAll);

/** An engine that holds each request until `answer()`, reporting no usage (saturation by requests in flight). */
function heldEngine() {
  const answers: (() => void)[] = [];
  const ev = new EventEmitter();
  const handler: Upstream = (req, res) => {
    req.resume();
    req.on('end', () => {
      answers.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id":"x","object":"chat.completion","choices":[]}');
      });
      ev.emit('arrived');
    });
  };
  const until = async (n: number) => {
    while (answers.length < n) await once(ev, 'arrived');
  };
  return { handler, until, answer: () => answers.shift()!() };
}

const send = (url: string, secret: string) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}` },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
  }).then(async (r) => ({ status: r.status, text: await r.text() }));

describe('the flow-control and limit metrics', () => {
  it('shows a replica saturated while it is, and counts 429s by reason: queue_timeout here, rpm and concurrency for keys', async () => {
    const engine = heldEngine();
    const { url, secret, keys, metrics } = await setupFleet([engine.handler], {}, { flow: { saturation: { maxInFlight: 1 }, queue: { ttlMs: 50 } } });
    const scrape = () => metrics.registry.metrics();
    expect(await scrape()).toContain('llmgw_replica_saturated{model="m",replica="r-1"} 0');
    const a = send(url, secret);
    await engine.until(1);
    expect(await scrape()).toContain('llmgw_replica_saturated{model="m",replica="r-1"} 1');
    // No usage reported: no prefill rate, so no estimated wait for this replica.
    expect(await scrape()).not.toMatch(/llmgw_replica_estimated_queue_wait_seconds\{/);
    expect((await send(url, secret)).status).toBe(429);
    engine.answer();
    expect((await a).status).toBe(200);
    expect(await scrape()).toContain('llmgw_replica_saturated{model="m",replica="r-1"} 0');

    const { secret: one } = await keys.create({ name: 'one', rpm: 2, max_concurrent: 1 }, (m) => m);
    for (let i = 0; i < 2; i++) {
      const served = send(url, one);
      await engine.until(1);
      if (i === 0) expect((await send(url, one)).status).toBe(429); // concurrency: one in flight
      engine.answer();
      expect((await served).status).toBe(200);
    }
    expect((await send(url, one)).status).toBe(429); // rpm: two this minute
    const text = await scrape();
    for (const [reason, n] of [
      ['queue_timeout', 1],
      ['queue_full', 0],
      ['concurrency', 1],
      ['rpm', 1],
      ['tpm', 0],
    ] as const)
      expect(text).toContain(`llmgw_rate_limited_total{reason="${reason}"} ${n}`);
  });
});
