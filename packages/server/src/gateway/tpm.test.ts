import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { DomainError } from '../errors.js';
import { SqliteStore } from '../store/sqlite.js';
import type { StoredKey } from '../store/store.js';
import { memoryStore } from '../store/testing.js';
import { admitLimits } from './admission.js';
import { KeyRing, type OtherInstances } from './keys.js';
import { closeAll, json, post, reply, setup } from './testing.js';

afterEach(closeAll);

/** A ring on a clock the test moves, with one key of `tpm`. */
async function ringWith(tpm: number, others?: OtherInstances) {
  const clock = { now: 1_000_000 };
  const ring = new KeyRing(memoryStore(), () => clock.now, undefined, others);
  const { secret } = await ring.create({ name: 'k', tpm }, (m) => m);
  const auth = ring.authenticate(secret);
  if (!auth.ok) throw new Error('key not found');
  return { ring, key: auth.key, clock, secret };
}

/** What `admitLimits` threw, or undefined when it let the request in. */
function refusal(ring: KeyRing, key: StoredKey): DomainError | undefined {
  try {
    admitLimits(ring, key)();
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  return undefined;
}

describe('a key with a tokens-per-minute quota', () => {
  it('tpm 30000 asked for twice that over 30 s is served 27,000–33,000 tokens (the issue’s Done-when, on a moved clock)', async () => {
    const { ring, key, clock } = await ringWith(30_000);
    // A client sending a 500-token request (100 prompt + 400 completion) every 250 ms for
    // 30 s: 120 requests, 60,000 tokens, each served in 1 s (so 4 in flight at a time),
    // its usage counted when it ends, as the engines report it.
    const ends: number[] = [];
    let served = 0;
    let refused = 0;
    const t0 = clock.now;
    for (let t = t0; t < t0 + 30_000; t += 250) {
      // Requests that end before this one arrives are counted first.
      while (ends.length && ends[0]! <= t) {
        clock.now = ends.shift()!;
        ring.recordUsage(key.id, 'm', { promptTokens: 100, completionTokens: 400 });
        served += 500;
      }
      clock.now = t;
      const e = refusal(ring, key);
      if (e) {
        refused++;
        expect(e.code).toBe('rate_limited');
        expect(e.details.reason).toBe('tpm');
        // The window reaches below the quota only once its first tokens leave it, a minute after they were counted.
        expect(t + e.details.retryAfterS! * 1000).toBeGreaterThanOrEqual(t0 + 60_000);
      } else ends.push(t + 1000);
    }
    for (const end of ends) {
      clock.now = end;
      ring.recordUsage(key.id, 'm', { promptTokens: 100, completionTokens: 400 });
      served += 500;
    }
    expect(served).toBeGreaterThanOrEqual(27_000);
    expect(served).toBeLessThanOrEqual(33_000);
    expect(refused).toBeGreaterThan(50);
    await ring.close();
  });

  it('answers with a Retry-After at which the quota lets it in again', async () => {
    const { ring, key, clock } = await ringWith(1000);
    ring.recordUsage(key.id, 'm', { promptTokens: 600, completionTokens: 0 });
    clock.now += 20_000;
    ring.recordUsage(key.id, 'm', { promptTokens: 0, completionTokens: 500 });
    const e = refusal(ring, key);
    expect(e?.message).toMatch(/^tpm: token quota of 1000 tokens per minute reached/);
    // The first 600 leave the window 60 s after they were counted: 40 s from now (within a 1 s bucket).
    expect(e?.details.retryAfterS).toBeGreaterThanOrEqual(40);
    expect(e?.details.retryAfterS).toBeLessThanOrEqual(41);
    clock.now += (e!.details.retryAfterS! - 1) * 1000;
    expect(refusal(ring, key)?.details.reason).toBe('tpm');
    clock.now += 1000;
    expect(refusal(ring, key)).toBeUndefined();
    await ring.close();
  });

  it('counts only the keys that have a quota, and drops a window once it is empty', async () => {
    const { ring, key, clock } = await ringWith(1000);
    const { key: free } = await ring.create({ name: 'free' }, (m) => m);
    ring.recordUsage(key.id, 'm', { promptTokens: 10, completionTokens: 5 });
    ring.recordUsage(free.id, 'm', { promptTokens: 10, completionTokens: 5 });
    expect([...ring.localCounts()]).toEqual([[key.id, { requests: 0, inFlight: 0, tokens: 15 }]]);
    expect(ring.tokensInWindow(key.id)).toBe(15);
    clock.now += 61_000;
    expect([...ring.localCounts()]).toEqual([]);
    await ring.close();
  });

  it('adds the tokens other instances counted; where theirs alone fill the quota it says 1 s', async () => {
    const others = { tokens: 0 };
    const { ring, key } = await ringWith(1000, { othersRequests: () => 0, othersInFlight: () => 0, othersTokens: () => others.tokens });
    ring.recordUsage(key.id, 'm', { promptTokens: 400 });
    others.tokens = 599;
    expect(refusal(ring, key)).toBeUndefined();
    others.tokens = 600;
    expect(refusal(ring, key)?.details).toMatchObject({ reason: 'tpm' });
    expect(refusal(ring, key)?.details.retryAfterS).toBeGreaterThan(1);
    others.tokens = 1000;
    expect(refusal(ring, key)?.details).toEqual({ reason: 'tpm', retryAfterS: 1 });
    await ring.close();
  });

  it('a refused request uses up neither the per-minute request count nor a concurrency slot', async () => {
    const clock = { now: 0 };
    const ring = new KeyRing(memoryStore(), () => clock.now);
    const { secret } = await ring.create({ name: 'k', tpm: 10, rpm: 2, max_concurrent: 1 }, (m) => m);
    const auth = ring.authenticate(secret);
    if (!auth.ok) throw new Error('key not found');
    ring.recordUsage(auth.key.id, 'm', { completionTokens: 10 });
    for (let i = 0; i < 5; i++) expect(ring.admit(auth.key)).toMatchObject({ ok: false, reason: 'tpm' });
    expect([...ring.localCounts()]).toEqual([[auth.key.id, { requests: 0, inFlight: 0, tokens: 10 }]]);
    await ring.close();
  });
});

describe('KeyRing.update', () => {
  it('changes limits and band by id or name, removes one given null, and the new quota applies at once', async () => {
    const { ring, key, secret } = await ringWith(100);
    ring.recordUsage(key.id, 'm', { promptTokens: 150 });
    expect(refusal(ring, key)?.details.reason).toBe('tpm');
    const v = await ring.update('k', { tpm: 1000, rpm: 5, priority: 'batch', models: ['a', 'a', 'b'] }, (m) => m.toUpperCase());
    expect(v).toMatchObject({ id: key.id, tpm: 1000, rpm: 5, priority: 'batch', models: ['A', 'B'] });
    // The next request authenticates to the changed key: its 150 tokens are under 1000.
    const after = ring.authenticate(secret);
    expect(after.ok && refusal(ring, after.key)).toBeUndefined();
    const updated = ring.list().find((k) => k.id === key.id)!;
    expect(updated).toEqual(v);
    const stored = (await ring.update(key.id, { rpm: null, priority: null }, (m) => m)) as Record<string, unknown>;
    expect(stored.rpm).toBeUndefined();
    expect(stored.priority).toBeUndefined();
    expect(stored.tpm).toBe(1000);
    await ring.close();
  });

  it('refuses an unknown key (404), a revoked one (409) and a model not in the catalog (400)', async () => {
    const { ring, key } = await ringWith(100);
    const code = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: DomainError) => [e.code, e.field],
      );
    expect(await code(ring.update('nope', { tpm: 1 }, (m) => m))).toEqual(['not_found', undefined]);
    expect(await code(ring.update(key.id, { models: ['x', 'gone'] }, (m) => (m === 'x' ? m : undefined)))).toEqual(['invalid_request', 'models[1]']);
    await ring.revoke(key.id);
    expect(await code(ring.update(key.id, { tpm: 1 }, (m) => m))).toEqual(['conflict', undefined]);
    await ring.close();
  });
});

describe('a tpm quota through the gateway', () => {
  it('serves the first request, answers the next 429 with Retry-After and reason tpm, and counts it in the metrics', async () => {
    const { url, keys, metrics } = await setup(json(200, '{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}'));
    const { secret } = await keys.create({ name: 'tiny', tpm: 5 }, (m) => m);
    expect((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] })).status).toBe(200);
    const r = await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] });
    expect(r.status).toBe(429);
    expect(reply(r.text).error).toMatchObject({
      code: 'rate_limit_exceeded',
      message: expect.stringMatching(/^tpm: token quota of 5 tokens per minute reached/),
    });
    // The 7 tokens leave the window a minute after they were counted.
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(59);
    expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(61);
    const text = await metrics.registry.metrics();
    expect(text).toContain('llmgw_rate_limited_total{reason="tpm"} 1');
    expect(text).toContain('llmgw_rate_limited_total{reason="rpm"} 0');
  });
});

describe('KeyRing.usageSince', () => {
  it('answers the minutes from the one `since` is in, its own pending usage included', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-usage-'));
    const store = new SqliteStore(dir);
    const clock = { now: 10 * 60_000 };
    const ring = new KeyRing(store, () => clock.now);
    const { key } = await ring.create({ name: 'k' }, (m) => m);
    ring.recordUsage(key.id, 'm', { promptTokens: 100, completionTokens: 1 });
    clock.now += 5 * 60_000;
    ring.recordUsage(key.id, 'm', { promptTokens: 20, completionTokens: 2 });
    clock.now += 30_000;
    ring.recordUsage(key.id, 'm', { promptTokens: 3, completionTokens: 3, error: true });
    const row = { key_id: key.id, key_name: 'k', model: 'm', cancelled: 0 };
    expect(await ring.usageSince(clock.now - 60_000)).toEqual([{ ...row, requests: 2, errors: 1, prompt_tokens: 23, completion_tokens: 5 }]);
    expect(await ring.usageSince(0)).toEqual([{ ...row, requests: 3, errors: 1, prompt_tokens: 123, completion_tokens: 6 }]);
    expect(await ring.usageSince(clock.now + 60_000)).toEqual([]);
    await ring.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
