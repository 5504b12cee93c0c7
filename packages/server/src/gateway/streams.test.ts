import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, openStream, post, reply, setup, sleep, type Upstream } from './testing.js';

// Streams an engine or a client does not finish: an engine silent past the idle timeout
// is cut off with an error event; a client that leaves is charged for what it got.

afterEach(closeAll);

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const role = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n';

/** An engine that sends its headers and `events`, then nothing, until the gateway hangs up. */
function stallAfter(events: string[], closed?: () => void): Upstream {
  return (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      for (const e of events) res.write(e);
      res.on('close', () => closed?.());
    });
  };
}

describe('an engine that stalls mid-stream', () => {
  it.each([
    ['after the headers', []],
    ['after two tokens', [role, token('a'), token('b')]],
  ])('ends the stream with an OpenAI error event %s', async (_what, events) => {
    let engineClosed = false;
    const { url, secret, keys, store, gw } = await setup(
      stallAfter(events, () => (engineClosed = true)),
      { streamIdleTimeoutMs: 200, keepAliveMs: 50 },
    );
    const t0 = Date.now();
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(r.status).toBe(200);
    const data = r.text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(data.slice(0, -1)).toEqual(events.map((e) => e.trimEnd()));
    expect(reply(data.at(-1)!.slice(6)).error).toMatchObject({ code: 'upstream_error', message: 'the engine sent nothing for 0.2s (--stream-idle-timeout)' });
    await sleep(20);
    expect(engineClosed).toBe(true);
    expect(gw.inFlight('r-1')).toBe(0);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1, completionTokens: events.length ? 2 : 0 })]);
  });

  it('does not count a slow client as an idle engine', async () => {
    // 128 events of 64 KiB: more than the sockets buffer, so while the client pauses the
    // relay waits on it, longer than the idle timeout.
    const big = token('x'.repeat(64 * 1024));
    const { url, secret } = await setup(
      (req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          for (let i = 0; i < 128; i++) res.write(big);
          res.end('data: [DONE]\n\n');
        });
      },
      { streamIdleTimeoutMs: 150 },
    );
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}` },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const reader = res.body!.getReader();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!text) await sleep(500);
      text += Buffer.from(value).toString('utf8');
    }
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text).not.toContain('stream-idle-timeout');
  });
});

describe('an engine that stalls mid-body in a JSON reply', () => {
  // Timed by undici's bodyTimeout for a request that is not streamed (its timer wheel is
  // accurate to about a second), by the gateway's own timer for a stream the engine
  // answered with JSON: the same answer either way.
  it.each([
    ['not streamed', false],
    ['asked for as a stream', true],
  ])('is a failed attempt that says so (%s)', async (_what, stream) => {
    let engineClosed!: () => void;
    const closed = new Promise<void>((r) => (engineClosed = r));
    const { url, secret, gw } = await setup(
      (req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
          res.write('{"id":"x","choices":[');
          res.on('close', engineClosed);
        });
      },
      { streamIdleTimeoutMs: 200 },
    );
    const t0 = Date.now();
    const r = await post(url, secret, { model: 'm', stream, messages: [{ role: 'user', content: 'hi' }] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(r.status).toBe(503);
    expect(reply(r.text).error.message).toContain('replica r-1: sent nothing for 0.2s mid-body (--stream-idle-timeout)');
    await closed;
    expect(gw.inFlight('r-1')).toBe(0);
  });
});

describe('a client that leaves mid-stream', () => {
  it.each([1, 3, 7])('is charged the %i tokens it was sent, marked as cancelled in the metrics', async (n) => {
    let engineClosed!: () => void;
    const closed = new Promise<void>((r) => (engineClosed = r));
    const events = [role, ...Array.from({ length: n }, (_, i) => token(`t${i}`))];
    const { url, secret, keys, store, metrics } = await setup(stallAfter(events, engineClosed));
    const { reader, abort } = await openStream(url, secret);
    let text = '';
    while (text.split('"content":"t').length - 1 < n) text += Buffer.from((await reader.read()).value!).toString('utf8');
    abort();
    await closed;
    await sleep(20);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, cancelled: 1, promptTokens: 0, completionTokens: n })]);
    const scraped = await metrics.registry.metrics();
    expect(scraped).toContain(`llmgw_tokens_total{model="m",direction="completion"} ${n}`);
    expect(scraped).toContain(`llmgw_client_cancelled_tokens_total{model="m"} ${n}`);
    expect(scraped).toContain('llmgw_client_disconnects_total{model="m"} 1');
  });
});

describe('a response that has ended', () => {
  it('takes no more writes, so no write-after-end error can reach the process', async () => {
    const { write, end } = await import('./sse.js');
    const errors: unknown[] = [];
    const { listen } = await import('./testing.js');
    const url = await listen((_req, res) => {
      res.on('error', (e) => errors.push(e));
      res.end('done');
      write(res, 'late');
      end(res, 'later');
    });
    expect(await (await fetch(url)).text()).toBe('done');
    await sleep(20);
    expect(errors).toEqual([]);
  });
});
