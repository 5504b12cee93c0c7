import { afterEach, describe, expect, it } from '@jest/globals';
import { usageTotals } from '../store/testing.js';
import { closeAll, json, post, reply, setup, sse } from './testing.js';

// Engine replies are untrusted input: whatever an engine sends, the gateway answers its
// client, keeps serving, and keeps nonsense out of usage and the token metrics.

afterEach(closeAll);

/** Usage values an engine must not be believed on, as they appear in its JSON. */
// The last two: over the per-reply maximum (MAX_TOKENS_PER_REPLY), and 2^53 − 1, whose sums overflowed PostgreSQL's bigint.
const BAD_USAGE = ['-1', '"0abc"', '1e999', '1.5', 'true', '{}', '9007199254740993', '1000000001', '9007199254740991'];

const content = 'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n';
const usageEvent = (v: string) => `data: {"id":"c","choices":[],"usage":{"prompt_tokens":${v},"completion_tokens":${v}}}\n\n`;

describe('bad usage from an engine', () => {
  it.each(BAD_USAGE)('streamed usage %s is ignored, counted, and the gateway keeps serving', async (v) => {
    const { url, secret, keys, store, metrics } = await setup(sse([content, usageEvent(v), 'data: [DONE]\n\n']));
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(r.text).toBe(`${content}data: [DONE]\n\n`);
    const again = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(again.status).toBe(200);
    await keys.flushUsage();
    // The one content event relayed is what is counted instead.
    expect(usageTotals(store.usage)).toEqual([expect.objectContaining({ requests: 2, errors: 0, promptTokens: 0, completionTokens: 2 })]);
    const scraped = await metrics.registry.metrics();
    expect(scraped).toMatch(/llmgw_engine_bad_usage_total\{model="m"\} 2/);
    expect(scraped).not.toMatch(/llmgw_tokens_total\{[^}]*direction="prompt"/);
  });

  it.each(BAD_USAGE)('non-streamed usage %s is ignored and the reply still reaches the client', async (v) => {
    const body = `{"id":"x","choices":[],"usage":{"prompt_tokens":${v},"completion_tokens":3}}`;
    const { url, secret, keys, store } = await setup(json(200, body));
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(r.text).toBe(body);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, errors: 0, promptTokens: 0, completionTokens: 0 })]);
  });

  it('keeps good usage as it is', async () => {
    const { url, secret, keys, store } = await setup(sse([content, usageEvent('0'), 'data: [DONE]\n\n']));
    await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ promptTokens: 0, completionTokens: 0 })]);
  });

  it('ignores a usage that is not an object', async () => {
    const { url, secret, keys, store } = await setup(json(200, '{"id":"x","usage":"lots"}'));
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ requests: 1, promptTokens: 0, completionTokens: 0 })]);
  });
});

describe('oversized engine replies', () => {
  it('refuses a non-streamed reply over the cap with a 502-ish retryable error, not a 500', async () => {
    const big = `{"id":"x","pad":"${'a'.repeat(64 * 1024)}"}`;
    const { url, secret } = await setup(json(200, big), { maxReplyBytes: 16 * 1024 });
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(503);
    expect(reply(r.text).error.message).toMatch(/over the limit of 16384 bytes/);
  });

  it('reads no more than the cap of a 5xx body and keeps the message short', async () => {
    const { url, secret } = await setup(json(500, 'x'.repeat(1 << 20)), { maxReplyBytes: 16 * 1024 });
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(503);
    expect(r.text.length).toBeLessThan(2000);
  });

  it('ends a stream whose single event grows past the cap with an error event', async () => {
    const { url, secret } = await setup(sse([content, `data: {"x":"${'a'.repeat(40 * 1024)}`, 'a'.repeat(40 * 1024)]), { maxEventBytes: 32 * 1024 });
    const r = await post(url, secret, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(r.text.startsWith(content)).toBe(true);
    const last = r.text.trim().split('\n\n').pop()!;
    expect(reply(last.slice(6)).error.message).toMatch(/event over 32768 bytes/);
  });
});

describe('cached tokens from an engine', () => {
  it.each(['-1', '"3"', '1.5', '{}'])('a prompt_tokens_details.cached_tokens of %s makes the usage bad, as any other count', async (v) => {
    const body = `{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":${v}}}}`;
    const { url, secret, keys, store, metrics } = await setup(json(200, body));
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    await keys.flushUsage();
    expect(store.usage).toEqual([expect.objectContaining({ promptTokens: 0 })]);
    expect(await metrics.registry.metrics()).toMatch(/llmgw_engine_bad_usage_total\{model="m"\} 1/);
  });
});
