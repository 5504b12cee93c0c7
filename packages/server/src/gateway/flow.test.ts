import { once, EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, reply, setupFleet, type Upstream } from './testing.js';

afterEach(closeAll);

/**
 * An engine that holds every request until the test lets it answer, in arrival order:
 * `arrived` lists each request's tag (its first message), `until(n)` waits for the n-th.
 * It reports no usage, so the gateway judges saturation by requests in flight.
 */
function gatedEngine() {
  const arrived: string[] = [];
  const answers: (() => void)[] = [];
  const ev = new EventEmitter();
  const handler: Upstream = (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const tag = (JSON.parse(body) as { messages: { content: string }[] }).messages[0]!.content;
      arrived.push(tag);
      answers.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: tag, object: 'chat.completion', choices: [] }));
      });
      ev.emit('arrived');
    });
  };
  const until = async (n: number) => {
    while (arrived.length < n) await once(ev, 'arrived');
  };
  return { handler, arrived, until, answer: () => answers.shift()!() };
}

async function send(url: string, secret: string, tag: string, o: { stream?: boolean; priority?: string; signal?: AbortSignal } = {}) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, ...(o.priority ? { 'x-llmgw-priority': o.priority } : {}) },
    body: JSON.stringify({ model: 'm', stream: o.stream ?? false, messages: [{ role: 'user', content: tag }] }),
    ...(o.signal ? { signal: o.signal } : {}),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), text: await res.text() };
}

/** One replica saturated at one request in flight: the second waits in the gateway. */
async function saturatedAtOne(queue: { ttlMs?: number; maxPerBand?: number; quantumTokens?: number } = {}) {
  const engine = gatedEngine();
  const fleet = await setupFleet([engine.handler], {}, { flow: { saturation: { maxInFlight: 1 }, queue } });
  const queued = (n: number) => waitFor(fleet.gw.flow.events, 'queued', () => fleet.gw.flow.waiting('m') >= n);
  return { ...fleet, engine, queued };
}

async function waitFor(ev: EventEmitter, name: string, done: () => boolean): Promise<void> {
  while (!done()) await once(ev, name);
}

/**
 * A streaming engine that reports usage (so cache-aware routing learns its prefill rate)
 * and holds each stream twice: before its first event (`prefill()` ends it) and before
 * its end (`finish()`). A request tagged `warm` streams through at once.
 */
function streamingEngine() {
  const arrived: string[] = [];
  const prefills: (() => void)[] = [];
  const finishes: (() => void)[] = [];
  const ev = new EventEmitter();
  const usage = `data: ${JSON.stringify({ id: 'x', choices: [], usage: { prompt_tokens: 100, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 0 } } })}\n\n`;
  const handler: Upstream = (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const tag = (JSON.parse(body) as { messages: { content: string }[] }).messages[0]!.content;
      arrived.push(tag);
      const first = () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ id: tag, choices: [{ index: 0, delta: { content: 'x' } }] })}\n\n`);
      };
      const end = () => res.end(`${usage}data: [DONE]\n\n`);
      if (tag === 'warm') {
        first();
        end();
      } else {
        prefills.push(first);
        finishes.push(end);
      }
      ev.emit('arrived');
    });
  };
  const until = async (n: number) => {
    while (arrived.length < n) await once(ev, 'arrived');
  };
  return { handler, arrived, until, prefill: () => prefills.shift()!(), finish: () => finishes.shift()!() };
}

describe('flow control', () => {
  it('judges a replica by its queued prefill once its rate is known, and sends the next request when a stream’s prefill ends', async () => {
    const engine = streamingEngine();
    // Any uncached prompt in flight is over a bound of 0 ms; requests in flight alone never saturate.
    const { url, secret, gw } = await setupFleet([engine.handler], {}, { flow: { saturation: { maxWaitMs: 0, maxInFlight: 1000 } } });
    const prompt = 'p'.repeat(400);
    expect((await send(url, secret, 'warm', { stream: true })).status).toBe(200);
    const a = send(url, secret, `${prompt}a`, { stream: true });
    await engine.until(2);
    const b = send(url, secret, `${prompt}b`, { stream: true });
    await waitFor(gw.flow.events, 'queued', () => gw.flow.waiting('m') === 1);
    // a's prefill ends (its first event) while it still streams: b goes now, not at a's end.
    engine.prefill();
    await engine.until(3);
    expect(gw.flow.waiting('m')).toBe(0);
    engine.prefill();
    engine.finish();
    engine.finish();
    expect((await a).status).toBe(200);
    expect((await b).status).toBe(200);
  });

  it('forwards at once below saturation: nothing waits in the gateway', async () => {
    const engine = gatedEngine();
    const { url, secret, gw } = await setupFleet([engine.handler], {}, { flow: { saturation: { maxInFlight: 2 } } });
    let queued = 0;
    gw.flow.events.on('queued', () => queued++);
    const a = send(url, secret, 'a');
    const b = send(url, secret, 'b');
    await engine.until(2);
    expect(queued).toBe(0);
    engine.answer();
    engine.answer();
    expect((await a).status).toBe(200);
    expect((await b).status).toBe(200);
  });

  it('holds a request while every replica is saturated and sends it when one frees', async () => {
    const { url, secret, engine, queued, gw, metrics } = await saturatedAtOne();
    const a = send(url, secret, 'a');
    await engine.until(1);
    const b = send(url, secret, 'b', { stream: true });
    await queued(1);
    expect(engine.arrived).toEqual(['a']);
    expect(await metrics.registry.getSingleMetricAsString('llmgw_queued_requests')).toContain('llmgw_queued_requests{model="m",band="standard"} 1');
    engine.answer();
    expect((await a).status).toBe(200);
    await engine.until(2);
    expect(gw.flow.waiting('m')).toBe(0);
    engine.answer();
    expect(reply((await b).text).id).toBe('b');
    expect(await metrics.registry.getSingleMetricAsString('llmgw_queue_wait_seconds')).toContain('llmgw_queue_wait_seconds_count{model="m",band="standard"} 1');
  });

  it('lets a higher band go first, and a request may lower its priority but not raise it', async () => {
    const { url, secret, engine, queued } = await saturatedAtOne();
    const a = send(url, secret, 'a');
    await engine.until(1);
    const sent = [send(url, secret, 'batch', { priority: 'batch' })];
    await queued(1);
    sent.push(send(url, secret, 'standard'));
    await queued(2);
    // Asking for interactive on a standard key is standard: behind the one already waiting.
    sent.push(send(url, secret, 'raised', { priority: 'interactive' }));
    await queued(3);
    for (let i = 0; i < 4; i++) {
      await engine.until(i + 1);
      engine.answer();
    }
    await a;
    for (const r of await Promise.all(sent)) expect(r.status).toBe(200);
    expect(engine.arrived).toEqual(['a', 'standard', 'raised', 'batch']);
  });

  it('serves an interactive key before a standard one, and a batch key cannot ask for more', async () => {
    const { url, secret, keys, engine, queued } = await saturatedAtOne();
    const interactive = (await keys.create({ name: 'chat', priority: 'interactive' }, (n) => n)).secret;
    const batch = (await keys.create({ name: 'nightly', priority: 'batch' }, (n) => n)).secret;
    const a = send(url, secret, 'a');
    await engine.until(1);
    const sent = [send(url, batch, 'batch-asks-interactive', { priority: 'interactive' })];
    await queued(1);
    sent.push(send(url, secret, 'standard'));
    await queued(2);
    sent.push(send(url, interactive, 'interactive'));
    await queued(3);
    for (let i = 0; i < 4; i++) {
      await engine.until(i + 1);
      engine.answer();
    }
    await a;
    await Promise.all(sent);
    expect(engine.arrived).toEqual(['a', 'interactive', 'standard', 'batch-asks-interactive']);
  });

  it('refuses a priority that is no band, before reading the body', async () => {
    const { url, secret } = await saturatedAtOne();
    const r = await send(url, secret, 'x', { priority: 'urgent' });
    expect(r.status).toBe(400);
    expect(reply(r.text).error.message).toMatch(/x-llmgw-priority "urgent" is not a priority/);
  });

  it('shares a band between keys: a quiet key’s request does not wait behind a noisy key’s backlog', async () => {
    // A quantum below one request's cost (~25 tokens here): a key sends one request a turn.
    const { url, secret, keys, engine, queued } = await saturatedAtOne({ quantumTokens: 16 });
    const quiet = (await keys.create({ name: 'quiet' }, (n) => n)).secret;
    const a = send(url, secret, 'a');
    await engine.until(1);
    const sent = [];
    for (let i = 0; i < 5; i++) {
      sent.push(send(url, secret, `noisy-${i}`));
      await queued(i + 1);
    }
    sent.push(send(url, quiet, 'quiet'));
    await queued(6);
    for (let i = 0; i < 7; i++) {
      await engine.until(i + 1);
      engine.answer();
    }
    await a;
    await Promise.all(sent);
    expect(engine.arrived.indexOf('quiet')).toBeLessThanOrEqual(2);
  });

  it('answers 429 with Retry-After when a request waits past its TTL, streamed or not', async () => {
    const { url, secret, engine, metrics } = await saturatedAtOne({ ttlMs: 100 });
    const a = send(url, secret, 'a');
    await engine.until(1);
    const [plain, streamed] = await Promise.all([send(url, secret, 'b'), send(url, secret, 'c', { stream: true })]);
    for (const r of [plain, streamed]) {
      expect(r.status).toBe(429);
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      const e = reply(r.text).error;
      expect(e.code).toBe('rate_limit_exceeded');
      expect(e.message).toMatch(/^queue_timeout: every replica of `m` stayed saturated/);
    }
    expect(engine.arrived).toEqual(['a']);
    expect(await metrics.registry.getSingleMetricAsString('llmgw_queue_refusals_total')).toContain(
      'llmgw_queue_refusals_total{model="m",reason="queue_timeout"} 2',
    );
    engine.answer();
    expect((await a).status).toBe(200);
  });

  it('answers 429 queue_full at once when the band is full', async () => {
    const { url, secret, engine, queued } = await saturatedAtOne({ maxPerBand: 1 });
    const a = send(url, secret, 'a');
    await engine.until(1);
    const b = send(url, secret, 'b');
    await queued(1);
    const c = await send(url, secret, 'c');
    expect(c.status).toBe(429);
    expect(c.retryAfter).toBe('1');
    expect(reply(c.text).error.message).toMatch(/^queue_full: /);
    engine.answer();
    await engine.until(2);
    engine.answer();
    expect((await a).status).toBe(200);
    expect((await b).status).toBe(200);
  });

  it('drops a waiting request whose client leaves, and never sends it', async () => {
    const { url, secret, engine, queued, gw } = await saturatedAtOne();
    const a = send(url, secret, 'a');
    await engine.until(1);
    const ac = new AbortController();
    const left = send(url, secret, 'gone', { stream: true, signal: ac.signal }).catch((e: Error) => e.name);
    await queued(1);
    const gone = once(gw.flow.events, 'left');
    ac.abort();
    await gone;
    expect(await left).toBe('AbortError');
    expect(gw.flow.waiting('m')).toBe(0);
    engine.answer();
    await a;
    const d = send(url, secret, 'd');
    await engine.until(2);
    engine.answer();
    expect((await d).status).toBe(200);
    expect(engine.arrived).toEqual(['a', 'd']);
  });

  it('still answers 503 when the model has no replica at all, and lets waiting requests go to it when the replicas change', async () => {
    const { url, secret, engine, queued, ready, changed } = await saturatedAtOne();
    const a = send(url, secret, 'a');
    await engine.until(1);
    const b = send(url, secret, 'b');
    await queued(1);
    ready.clear();
    changed();
    const r = await b;
    expect(r.status).toBe(503);
    expect(reply(r.text).error.code).toBe('no_ready_replica');
    engine.answer();
    await a;
  });
});
