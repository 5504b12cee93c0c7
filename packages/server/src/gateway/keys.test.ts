import { describe, expect, it } from '@jest/globals';
import { KeyRing } from './keys.js';
import type { StoredKey } from '../store/store.js';
import { memoryStore } from '../../test/factories.js';

describe('KeyRing.admit', () => {
  it('does not count a request refused for concurrency against the per-minute limit', () => {
    const now = 1_000_000;
    const ring = new KeyRing(memoryStore(), () => now);
    const { secret } = ring.create({ name: 'k', rpm: 2, max_concurrent: 1 }, (m) => m);
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
    ring.close();
  });

  it('releases a concurrency slot once even when release is called twice', () => {
    const ring = new KeyRing(memoryStore(), () => 0);
    const k = { id: 'key-1', name: 'k', hash: '', prefix: '', models: [], maxConcurrent: 1, createdAt: '' } as StoredKey;
    const a = ring.admit(k);
    if (a.ok) {
      a.release();
      a.release();
    }
    expect(ring.admit(k).ok).toBe(true);
    expect(ring.admit(k).ok).toBe(false);
    ring.close();
  });
});
