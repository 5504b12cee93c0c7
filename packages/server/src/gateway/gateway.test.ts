import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, openStream, reply, setup, sleep, sse, post, type Upstream } from './testing.js';

afterEach(closeAll);

describe('gateway SSE pass-through', () => {
  it('forwards a multi-byte character split across two chunks intact', async () => {
    const event = Buffer.from('data: {"choices":[{"delta":{"content":"héllo €"}}]}\n\n', 'utf8');
    const cut = event.indexOf(Buffer.from('€')) + 1; // inside the three bytes of €
    const { url, secret } = await setup(sse([event.subarray(0, cut), event.subarray(cut), 'data: [DONE]\n\n']));
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(r.text).toContain('"content":"héllo €"');
    expect(r.text).not.toContain('\uFFFD');
    expect(r.text).toBe(`${event.toString('utf8')}data: [DONE]\n\n`);
  });

  it('forwards a data event split over two chunks intact and drops a split usage event the client did not ask for', async () => {
    const usage = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n';
    const { url, secret, keys, store } = await setup(
      sse(['data: {"choices":[{"delta":{"cont', 'ent":"hi"}}]}\n\n', usage.slice(0, 25), usage.slice(25), 'data: [DONE]\n\n']),
    );
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.text).toBe('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, promptTokens: 7, completionTokens: 3 })]);
  });
});

describe('gateway non-streaming', () => {
  /** The first request gets headers and part of a body, then the connection dies. */
  const failFirst = (): Upstream => {
    let calls = 0;
    return (req, res) => {
      req.resume();
      req.on('end', () => {
        if (++calls === 1) {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
          res.write('{"id":');
          setTimeout(() => res.destroy(), 20);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id":"ok","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}');
      });
    };
  };

  it('tries another replica when the engine dies while sending a body the client has not seen yet', async () => {
    const { url, secret, store, keys } = await setup(failFirst(), {}, 2);
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(reply(r.text).id).toBe('ok');
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, promptTokens: 1, completionTokens: 2 })]);
  });

  it('answers a retryable 503, not an internal 500, when the only replica dies mid-body', async () => {
    const { url, secret, store, keys } = await setup(failFirst());
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(503);
    expect(reply(r.text).error.code).toBe('no_ready_replica');
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1 })]);
  });

  it('sends a request again, once, on another connection when the engine closed one at once', async () => {
    // As an engine closing an idle kept-alive connection just as a request goes out on it.
    let calls = 0;
    const { url, secret } = await setup((req, res) => {
      req.resume();
      req.on('end', () => {
        if (++calls === 1) return req.socket.destroy();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id":"ok","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}');
      });
    });
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(reply(r.text).id).toBe('ok');
    expect(calls).toBe(2);
  });

  it('does not send again a request whose connection closed after the engine had it for a while', async () => {
    // A generation cut off (a crash, a reset in between): not run again on the same replica.
    let calls = 0;
    const { url, secret } = await setup((req) => {
      req.resume();
      req.on('end', () => {
        calls++;
        setTimeout(() => req.socket.destroy(), 1100);
      });
    });
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(503);
    expect(calls).toBe(1);
  });

  it('says every replica is cooling down, not that none is ready, when the only one just failed', async () => {
    const { url, secret } = await setup((req, res) => {
      req.resume();
      req.on('end', () => res.destroy());
    });
    const first = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(first.status).toBe(503);
    const again = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(again.status).toBe(503);
    expect(reply(again.text).error.message).toMatch(/^no replica could serve `m`: m: every ready replica \(r\S+\) failed a moment ago and is cooling down$/);
  });
});

describe('gateway cold start', () => {
  it('puts an engine error in the stream when a cold-start stream already said 200', async () => {
    const { url, secret, store, keys } = await setup(
      (req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'prompt is too long', type: 'invalid_request_error', param: null, code: 'context_length_exceeded' } }));
        });
      },
      {},
      1,
      { min: 0, max: 1 },
    );
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    const events = r.text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events).toHaveLength(1);
    expect(reply(events[0]!.slice(6)).error).toMatchObject({ message: 'prompt is too long', code: 'context_length_exceeded' });
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 1 })]);
  });
});

describe('gateway client abort', () => {
  it('aborts the engine and leaves no request counted in flight when the client leaves mid-stream', async () => {
    let engineSawClose!: () => void;
    const closed = new Promise<void>((r) => (engineSawClose = r));
    const { url, secret, gw } = await setup((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
        const t = setInterval(() => res.write('data: {"choices":[{"delta":{"content":"b"}}]}\n\n'), 10);
        res.on('close', () => {
          clearInterval(t);
          engineSawClose();
        });
      });
    });
    const { reader, abort } = await openStream(url, secret);
    await reader.read();
    expect(gw.inFlight('r-1')).toBe(1);
    expect(gw.load('m').inFlight).toBe(1);
    abort();
    await closed;
    await sleep(50);
    expect(gw.inFlight('r-1')).toBe(0);
    expect(gw.load('m').inFlight).toBe(0);
  });
});
