import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { DomainError } from '../errors.js';
import { memoryStore } from '../../test/factories.js';
import { FaultyStore } from './faulty.js';
import { GuardedStore } from './guard.js';

const guarded = (probeIntervalMs = 10) => {
  const faulty = new FaultyStore(memoryStore());
  return { faulty, store: new GuardedStore(faulty, { log: pino({ level: 'silent' }), probeIntervalMs }) };
};
const key = { id: 'k', name: 'n', hash: 'h', prefix: 'p', models: [], createdAt: '2026-01-01T00:00:00.000Z' };

describe('GuardedStore', () => {
  it('turns a store failure into store_unavailable and says degraded until a write succeeds', () => {
    const { faulty, store } = guarded(60_000);
    faulty.fault = 'ENOSPC';
    let err: unknown;
    try {
      store.saveKey(key);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect([(err as DomainError).code, (err as DomainError).message]).toEqual(['store_unavailable', 'store unavailable: ENOSPC: no space left on device, write']);
    expect(store.health()).toMatchObject({ status: 'degraded', reason: 'store unavailable: ENOSPC: no space left on device, write' });
    expect(store.loadKeys()).toEqual([]); // a full disk still reads
    expect(store.stats().errors.get('saveKey')).toBe(1);
    faulty.fault = undefined;
    store.saveKey(key);
    expect(store.health()).toEqual({ status: 'ok' });
    store.close();
  });

  it('passes an error of the transaction body through without blaming the store, and rolls back nothing it did not write', () => {
    const { store } = guarded();
    expect(() =>
      store.transaction(() => {
        throw new Error('a bug');
      }),
    ).toThrow('a bug');
    expect(store.health()).toEqual({ status: 'ok' });
    store.close();
  });

  it('is not healthy again before the transaction commits', () => {
    const { faulty, store } = guarded(60_000);
    faulty.fault = 'EIO';
    expect(() => store.loadKeys()).toThrow('store unavailable: EIO: i/o error, read');
    expect(() =>
      store.transaction(() => {
        faulty.fault = undefined;
        store.saveKey(key); // succeeds, but the commit below fails
        faulty.fault = 'EIO';
      }),
    ).toThrow('store unavailable: EIO');
    expect(store.health().status).toBe('degraded');
    store.close();
  });

  it('finds out by itself that the store takes writes again', async () => {
    const { faulty, store } = guarded(10);
    faulty.fault = 'ENOSPC';
    expect(() => store.addUsage([])).toThrow('store unavailable');
    faulty.fault = undefined;
    for (let i = 0; i < 100 && store.health().status !== 'ok'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.health()).toEqual({ status: 'ok' });
    expect(faulty.writes.ok).toBeGreaterThan(0);
    store.close();
  });
});

describe('GuardedStore probe', () => {
  it('does not call the store healthy while the writes callers retry keep failing', async () => {
    const faulty = new FaultyStore(memoryStore());
    const store = new GuardedStore(faulty, { log: pino({ level: 'silent' }), probeIntervalMs: 20 });
    // Usage writes fail (a corrupt page), the probe's write would succeed.
    faulty.inner.addUsage = () => {
      throw Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' });
    };
    const until = Date.now() + 200;
    while (Date.now() < until) {
      expect(() => store.addUsage([])).toThrow('store unavailable: database disk image is malformed (SQLITE_CORRUPT)');
      await new Promise((r) => setTimeout(r, 5));
      expect(store.health().status).toBe('degraded');
    }
    store.close();
  });
});
