import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { DomainError } from '../errors.js';
import { makeReplica } from '../../test/factories.js';
import { memoryStore } from './testing.js';
import { FaultyStore } from './faulty.js';
import { GuardedStore } from './guard.js';

const guarded = (probeIntervalMs = 10) => {
  const faulty = new FaultyStore(memoryStore());
  return { faulty, store: new GuardedStore(faulty, { log: pino({ level: 'silent' }), probeIntervalMs }) };
};
const key = { id: 'k', name: 'n', hash: 'h', prefix: 'p', models: [], createdAt: '2026-01-01T00:00:00.000Z' };

describe('GuardedStore', () => {
  it('turns a store failure into store_unavailable and says degraded until a write succeeds', async () => {
    const { faulty, store } = guarded(60_000);
    faulty.fault = 'ENOSPC';
    let err: unknown;
    try {
      await store.saveKey(key);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect([(err as DomainError).code, (err as DomainError).message]).toEqual([
      'store_unavailable',
      'store unavailable: ENOSPC: no space left on device, write',
    ]);
    expect(store.health()).toMatchObject({ status: 'degraded', reason: 'store unavailable: ENOSPC: no space left on device, write' });
    expect(await store.loadKeys()).toEqual([]); // a full disk still reads
    expect(store.stats().errors.get('saveKey')).toBe(1);
    faulty.fault = undefined;
    await store.saveKey(key);
    expect(store.health()).toEqual({ status: 'ok' });
    await store.close();
  });

  it('passes a lost lease through as not_leader without calling the store degraded', async () => {
    const { faulty, store } = guarded();
    faulty.inner.writeReplicas = () => Promise.reject(new DomainError('not_leader', 'this instance is no longer the leader'));
    await expect(store.writeReplicas([makeReplica()], [], { holder: 'a', epoch: 1 })).rejects.toMatchObject({ code: 'not_leader' });
    expect(store.health()).toEqual({ status: 'ok' });
    expect(store.stats().errors.size).toBe(0);
    await store.close();
  });

  it('a failed batch of replica writes leaves the store degraded', async () => {
    const { faulty, store } = guarded(60_000);
    faulty.fault = 'EIO';
    await expect(store.loadKeys()).rejects.toThrow('store unavailable: EIO: i/o error, read');
    await expect(store.writeReplicas([makeReplica()], ['r-old'])).rejects.toThrow('store unavailable: EIO');
    expect(store.health().status).toBe('degraded');
    expect(store.stats().errors.get('writeReplicas')).toBe(1);
    await store.close();
  });

  it('finds out by itself that the store takes writes again', async () => {
    const { faulty, store } = guarded(10);
    faulty.fault = 'ENOSPC';
    await expect(store.addUsage([])).rejects.toThrow('store unavailable');
    faulty.fault = undefined;
    for (let i = 0; i < 100 && store.health().status !== 'ok'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.health()).toEqual({ status: 'ok' });
    expect(faulty.writes.ok).toBeGreaterThan(0);
    await store.close();
  });
});

describe('GuardedStore probe', () => {
  it('does not call the store healthy while the writes callers retry keep failing', async () => {
    const faulty = new FaultyStore(memoryStore());
    // The guard's clock moves 5 ms per retry, whatever the machine's load does to the
    // real timers: callers retry more often than the probe interval, so no probe may run.
    let nowMs = 0;
    const store = new GuardedStore(faulty, { log: pino({ level: 'silent' }), probeIntervalMs: 20, now: () => nowMs });
    // Usage writes fail (a corrupt page), the probe's write would succeed.
    faulty.inner.addUsage = () => Promise.reject(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' }));
    for (let i = 0; i < 40; i++) {
      await expect(store.addUsage([])).rejects.toThrow('store unavailable: database disk image is malformed (SQLITE_CORRUPT)');
      nowMs += 5;
      // Real time for the probe timer (20 ms) to fire, had it anything to do.
      await new Promise((r) => setTimeout(r, 25));
      expect(store.health().status).toBe('degraded');
    }
    // And once callers stop writing, the probe does run and finds the store healthy.
    nowMs += 1000;
    for (let i = 0; i < 200 && store.health().status !== 'ok'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.health().status).toBe('ok');
    await store.close();
  });
});
