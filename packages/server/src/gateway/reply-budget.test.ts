import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, post, reply, setup, type Upstream } from './testing.js';
import { ReplyBudget } from './reply-budget.js';
import { MAX_TOKENS_PER_REPLY, findUsageIn } from './usage.js';

// The reply budget: non-streamed engine replies are buffered whole, so the bytes they
// hold are bounded across all requests (`--reply-buffer`), not only per reply.

afterEach(closeAll);

/** Resolves once `cond` holds, checked on every turn of the event loop (state, not time). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setImmediate(r));
}

/**
 * An engine whose replies are `size` bytes of JSON, declared in Content-Length or not
 * (chunked); each sends its first half at once and the rest when the test calls `finish`.
 */
function slowEngine(size: number, declared: boolean) {
  const finishers: (() => void)[] = [];
  const body = Buffer.from(`{"id":"x","pad":"${'a'.repeat(size - 20)}"}`.padEnd(size, ' '));
  const handler: Upstream = (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', ...(declared ? { 'content-length': String(body.length) } : {}) });
      res.write(body.subarray(0, body.length / 2));
      finishers.push(() => res.end(body.subarray(body.length / 2)));
    });
  };
  return { handler, finishers, body };
}

describe('the reply budget', () => {
  it('takes a declared reply whole, refuses with 503 overloaded one that does not fit, and gives the bytes back', async () => {
    const e = slowEngine(3 * 1024 * 1024, true);
    const { url, secret, gw } = await setup(e.handler, { replyBufferBytes: 4 * 1024 * 1024, maxReplyBytes: 8 * 1024 * 1024 });
    const first = post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] });
    await until(() => gw.replies.inUse === e.body.length);
    const second = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] });
    expect(second.status).toBe(503);
    expect(reply(second.text).error.code).toBe('overloaded');
    expect(second.headers['retry-after']).toBe('1');
    expect(gw.replies.inUse).toBe(e.body.length);
    for (const f of e.finishers.splice(0)) f();
    const r = await first;
    expect(r.status).toBe(200);
    expect(r.text.length).toBe(e.body.length);
    await until(() => gw.replies.inUse === 0);
    // Room again: the next one is served.
    const third = post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] });
    await until(() => e.finishers.length === 1);
    e.finishers.pop()!();
    expect((await third).status).toBe(200);
  });

  it('counts an undeclared (chunked) reply as it arrives and stops reading it at the budget', async () => {
    const e = slowEngine(3 * 1024 * 1024, false);
    const { url, secret, gw } = await setup(e.handler, { replyBufferBytes: 2 * 1024 * 1024, maxReplyBytes: 8 * 1024 * 1024 });
    const r = post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] });
    await until(() => e.finishers.length === 1);
    e.finishers.pop()!();
    const answer = await r;
    expect(answer.status).toBe(503);
    expect(reply(answer.text).error.code).toBe('overloaded');
    expect(gw.replies.inUse).toBe(0);
  });

  it('a hold gives back what it took, once', () => {
    const b = new ReplyBudget(10);
    const h = b.hold();
    expect(h.take(6)).toBe(true);
    expect(b.hold().take(5)).toBe(false);
    expect(h.take(4)).toBe(true);
    h.release();
    h.release();
    expect(b.inUse).toBe(0);
  });
});

const MIB = 1024 * 1024;
const pad = (n: number) => 'x'.repeat(n);

// The same search for a reply of a few bytes and one of a MiB (only its tail is searched).
describe.each([
  ['a small reply', 0],
  ['a large reply', MIB],
])('usage of %s', (_, padding) => {
  it('is found at its end without parsing the whole reply', () => {
    const text = `{"id":"x","data":"${pad(padding)}","usage": {"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`;
    expect(findUsageIn(Buffer.from(text))).toEqual({ prompt_tokens: 7, completion_tokens: 2, cached_tokens: 1 });
  });

  it('is not fooled by "usage" inside a string (its quotes are escaped there) or as a value', () => {
    const text = `{"object":"usage","data":"${pad(padding)} \\"usage\\": {\\"prompt_tokens\\":99}","usage":{"prompt_tokens":3}}`;
    expect(findUsageIn(Buffer.from(text))).toEqual({ prompt_tokens: 3 });
    expect(findUsageIn(Buffer.from(`{"data":"${pad(padding)}","object":"usage"}`))).toBeUndefined();
  });

  it('is bad when it is not an object, never closes, or is over the per-reply maximum', () => {
    const big = (u: string) => Buffer.from(`{"data":"${pad(padding)}","usage":${u}`);
    expect(findUsageIn(big('"lots"}'))).toBe('bad');
    expect(findUsageIn(big(`{"prompt_tokens":1,"x":"${pad(70 * 1024)}"}}`))).toBe('bad');
    expect(findUsageIn(big(`{"prompt_tokens":${MAX_TOKENS_PER_REPLY + 1}}}`))).toBe('bad');
    expect(findUsageIn(big('null}'))).toBeUndefined();
  });

  it("is the Responses API's counts under their own names", () => {
    const text = `{"object":"response","output":[{"content":[{"text":"${pad(padding)}"}]}],"usage":{"input_tokens":4,"output_tokens":2,"input_tokens_details":{"cached_tokens":3}}}`;
    expect(findUsageIn(Buffer.from(text))).toEqual({ prompt_tokens: 4, completion_tokens: 2, cached_tokens: 3 });
  });
});

describe('usage of a reply up to 1 MiB', () => {
  it("is the reply's own top-level key, whatever comes after it or is nested in it", () => {
    // vLLM puts prompt_logprobs (as large as the client asks) after usage.
    const logprobs = `[${Array.from({ length: 3000 }, (_, i) => `{"${i}":{"logprob":-1.5,"rank":1,"decoded_token":"tok${i}"}}`).join(',')}]`;
    const vllm = `{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1},"prompt_logprobs":${logprobs}}`;
    expect(vllm.length).toBeGreaterThan(2 * 64 * 1024);
    expect(findUsageIn(Buffer.from(vllm))).toEqual({ prompt_tokens: 9, completion_tokens: 1 });
    // A `usage` key nested in client-sent metadata, before or after the reply's own.
    const nested = (meta: string) => `{"object":"response","output":[],"usage":{"input_tokens":4,"output_tokens":2},"metadata":${meta}}`;
    expect(findUsageIn(Buffer.from(nested('{"usage":"x"}')))).toEqual({ prompt_tokens: 4, completion_tokens: 2 });
    expect(findUsageIn(Buffer.from(`{"metadata":{"usage":{"prompt_tokens":99}},"usage":{"prompt_tokens":3}}`))).toEqual({ prompt_tokens: 3 });
    expect(findUsageIn(Buffer.from(`{"metadata":{"usage":{"prompt_tokens":99}},"tools":[{"usage":1}]}`))).toBeUndefined();
  });
});

describe('usage of a large reply', () => {
  it('of a large reply reaches the key', async () => {
    const body = `{"id":"x","data":"${pad(2 * MIB)}","usage":{"prompt_tokens":5,"completion_tokens":4}}`;
    const { url, secret, keys, store } = await setup(
      (req, res) => {
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
      },
      { maxReplyBytes: 4 * MIB },
    );
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] })).status).toBe(200);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, promptTokens: 5, completionTokens: 4 })]);
  });
});
