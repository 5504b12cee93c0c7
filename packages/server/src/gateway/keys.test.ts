import { describe, expect, it } from '@jest/globals';
import { KeyRing } from './keys.js';
import { MAX_USAGE_COUNT, type StoredKey } from '../store/store.js';
import { memoryStore } from '../store/testing.js';

describe('KeyRing.admit', () => {
  it('does not count a request refused for concurrency against the per-minute limit', async () => {
    const now = 1_000_000;
    const ring = new KeyRing(memoryStore(), () => now);
    const { secret } = await ring.create({ name: 'k', rpm: 2, max_concurrent: 1 }, (m) => m);
    const auth = ring.authenticate(secret);
    if (!auth.ok) throw new Error('key not found');
    const k = auth.key;
    const first = ring.admit(k);
    expect(first.ok).toBe(true);
    // Refused: one request is already in flight.
    expect(ring.admit(k)).toMatchObject({ ok: false, reason: 'concurrency' });
    if (first.ok) first.release();
    // Only one request was served this minute, so a second one is within rpm 2.
    expect(ring.admit(k).ok).toBe(true);
    await ring.close();
  });

  it('releases a concurrency slot once even when release is called twice', async () => {
    const ring = new KeyRing(memoryStore(), () => 0);
    const k = { id: 'key-1', name: 'k', hash: '', prefix: '', models: [], maxConcurrent: 1, createdAt: '' } as StoredKey;
    const a = ring.admit(k);
    if (a.ok) {
      a.release();
      a.release();
    }
    expect(ring.admit(k).ok).toBe(true);
    expect(ring.admit(k).ok).toBe(false);
    await ring.close();
  });
});

describe('KeyRing and a store that refuses writes', () => {
  it('keeps usage the store refused and writes it, once, with what came after', async () => {
    let full = false;
    const store = memoryStore();
    const add = store.addUsage.bind(store);
    store.addUsage = async (ds) => {
      if (full) throw new Error('ENOSPC');
      return add(ds);
    };
    const ring = new KeyRing(store, () => 90_000);
    ring.recordUsage('key-1', 'm', { promptTokens: 2, completionTokens: 1 });
    full = true;
    expect(await ring.flushUsage()).toBe(false);
    ring.recordUsage('key-1', 'm', { promptTokens: 3, completionTokens: 1, error: true });
    expect(await ring.flushUsage()).toBe(false);
    expect(ring.usageRows()).toEqual([expect.objectContaining({ requests: 2, errors: 1, prompt_tokens: 5, completion_tokens: 2 })]);
    full = false;
    expect(await ring.close()).toBe(0);
    // Counted in the minute the requests ended in, for `usage_minutes`.
    expect(store.usage).toEqual([{ keyId: 'key-1', model: 'm', requests: 2, errors: 1, cancelled: 0, promptTokens: 5, completionTokens: 2, minuteMs: 60_000 }]);
  });

  it('reports the rows the store refused for their values and drops them, keeping the rest written', async () => {
    const store = memoryStore();
    const add = store.addUsage.bind(store);
    // The store writes key-1's row and refuses key-2's, as PostgresStore does a value bigint cannot take.
    store.addUsage = async (ds) => {
      await add(ds.filter((d) => d.keyId !== 'key-2'));
      return ds.filter((d) => d.keyId === 'key-2');
    };
    const ring = new KeyRing(store);
    const refused: string[] = [];
    ring.onUsageRefused = (rows) => refused.push(...rows.map((r) => r.keyId));
    ring.recordUsage('key-1', 'm', { promptTokens: 1 });
    ring.recordUsage('key-2', 'm', { promptTokens: 1 });
    expect(await ring.flushUsage()).toBe(true);
    expect(refused).toEqual(['key-2']);
    expect(store.usage.map((u) => u.keyId)).toEqual(['key-1']);
    // Not sent again: nothing is pending.
    expect(await ring.close()).toBe(0);
    expect(refused).toEqual(['key-2']);
  });

  it('saturates its sums at MAX_USAGE_COUNT', async () => {
    const store = memoryStore();
    const ring = new KeyRing(store);
    for (let i = 0; i < 3; i++) ring.recordUsage('key-1', 'm', { promptTokens: MAX_USAGE_COUNT });
    expect(ring.usageRows()).toEqual([expect.objectContaining({ requests: 3, prompt_tokens: MAX_USAGE_COUNT })]);
    await ring.close();
  });

  it('counts a request the client left mid-stream as cancelled, its tokens with the rest', async () => {
    const store = memoryStore();
    const ring = new KeyRing(store, () => 90_000);
    ring.recordUsage('key-1', 'm', { promptTokens: 4, completionTokens: 2 });
    ring.recordUsage('key-1', 'm', { completionTokens: 3, cancelled: true });
    expect(ring.usageRows()).toEqual([
      { key_id: 'key-1', key_name: 'key-1', model: 'm', requests: 2, errors: 0, cancelled: 1, prompt_tokens: 4, completion_tokens: 5 },
    ]);
    expect(await ring.close()).toBe(0);
    expect(store.usage).toEqual([{ keyId: 'key-1', model: 'm', requests: 2, errors: 0, cancelled: 1, promptTokens: 4, completionTokens: 5, minuteMs: 60_000 }]);
  });

  it('leaves the keys as they were when a create or revoke is refused', async () => {
    const store = memoryStore();
    const ring = new KeyRing(store);
    const { key, secret } = await ring.create({ name: 'a' }, (m) => m);
    store.saveKey = () => Promise.reject(new Error('ENOSPC'));
    await expect(ring.create({ name: 'b' }, (m) => m)).rejects.toThrow('ENOSPC');
    await expect(ring.revoke(key.id)).rejects.toThrow('ENOSPC');
    expect(ring.list()).toEqual([key]);
    expect(ring.authenticate(secret).ok).toBe(true);
    await ring.close();
  });
});

describe('KeyRing with other instances counting the same key', () => {
  it('adds what the others counted to its own, for the per-minute and the concurrency limit', async () => {
    const others = { requests: 2, inFlight: 0 };
    const ring = new KeyRing(memoryStore(), () => 0, undefined, {
      othersRequests: () => others.requests,
      othersInFlight: () => others.inFlight,
      othersTokens: () => 0,
    });
    const { secret } = await ring.create({ name: 'k', rpm: 3, max_concurrent: 2 }, (m) => m);
    const auth = ring.authenticate(secret);
    if (!auth.ok) throw new Error('key not found');
    const first = ring.admit(auth.key);
    expect(first.ok).toBe(true);
    // 1 here + 2 elsewhere = the 3 per minute allowed.
    expect(ring.admit(auth.key)).toMatchObject({ ok: false, reason: 'rpm', retryAfterS: 1 });
    others.requests = 0;
    others.inFlight = 1;
    // 1 in flight here + 1 elsewhere = the 2 allowed at once.
    expect(ring.admit(auth.key)).toMatchObject({ ok: false, reason: 'concurrency' });
    expect([...ring.localCounts()]).toEqual([[auth.key.id, { requests: 1, inFlight: 1, tokens: 0 }]]);
    await ring.close();
  });
});

describe('KeyRing.revoke', () => {
  it('says already when the key was revoked before, and keeps the first time', async () => {
    let now = 1_000_000;
    const ring = new KeyRing(memoryStore(), () => now);
    const { key } = await ring.create({ name: 'a' }, (m) => m);
    const first = await ring.revoke(key.id);
    expect(first).toMatchObject({ id: key.id, revoked_at: new Date(1_000_000).toISOString() });
    expect(first.already).toBeUndefined();
    now += 5_000;
    expect(await ring.revoke(key.id)).toMatchObject({ id: key.id, revoked_at: first.revoked_at, already: true });
    await ring.close();
  });
});
