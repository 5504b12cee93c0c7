import { describe, expect, it, jest } from '@jest/globals';
import { latestRead, serialWrites } from './serial.js';

describe('serialWrites', () => {
  it('writes one batch at a time, and what is queued during a write goes in the next batch', async () => {
    const queue: number[] = [];
    const batches: number[][] = [];
    let inFlight = 0;
    let most = 0;
    const flush = serialWrites(
      () => queue.length > 0,
      async () => {
        const batch = queue.splice(0);
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        batches.push(batch);
        return true;
      },
    );
    queue.push(1);
    const first = flush();
    queue.push(2, 3);
    const joined = flush();
    expect(joined).toBe(first);
    expect(await first).toBe(true);
    expect([batches, most]).toEqual([[[1], [2, 3]], 1]);
    expect(await flush()).toBe(true); // nothing left: resolves at once
  });

  it('stops at a refused batch and starts again on the next call', async () => {
    const queue: number[] = [5];
    let refuse = true;
    const written: number[] = [];
    const flush = serialWrites(
      () => queue.length > 0,
      async () => {
        const batch = queue.splice(0);
        if (refuse) {
          queue.unshift(...batch);
          return false;
        }
        written.push(...batch);
        return true;
      },
    );
    expect(await flush()).toBe(false);
    expect(queue).toEqual([5]);
    // A call while a refused batch is being written gets a try of its own.
    const first = flush();
    refuse = false;
    void flush();
    expect(await first).toBe(true);
    expect(written).toEqual([5]);
    queue.push(6);
    expect(await flush()).toBe(true);
    expect(written).toEqual([5, 6]);
  });
});

describe('latestRead', () => {
  const reader = () => {
    const resolvers: ((v: string) => void)[] = [];
    const installed: string[] = [];
    const reload = latestRead(
      () => new Promise<string>((r) => resolvers.push(r)),
      (v) => installed.push(v),
    );
    return { resolvers, installed, reload };
  };

  it('a call during a read is answered by a read begun after it: the older read cannot be the last installed', async () => {
    const { resolvers, installed, reload } = reader();
    const older = reload();
    const newer = reload();
    // The second read has not begun: the first one may still hold what came before the call.
    expect(resolvers).toHaveLength(1);
    resolvers[0]!('before the revocation');
    await new Promise((r) => setImmediate(r));
    expect(resolvers).toHaveLength(2);
    resolvers[1]!('after the revocation');
    await Promise.all([older, newer]);
    expect(installed).toEqual(['before the revocation', 'after the revocation']);
  });

  it('a burst of calls during one read is one more read, not one each', async () => {
    const { resolvers, installed, reload } = reader();
    const calls = [reload(), ...Array.from({ length: 100 }, () => reload())];
    resolvers[0]!('first');
    await new Promise((r) => setImmediate(r));
    resolvers[1]!('second');
    await Promise.all(calls);
    expect(resolvers).toHaveLength(2);
    expect(installed).toEqual(['first', 'second']);
    // Idle again: the next call reads at once.
    const later = reload();
    expect(resolvers).toHaveLength(3);
    resolvers[2]!('third');
    await later;
    expect(installed).toEqual(['first', 'second', 'third']);
  });

  it('with burstMs, a read asked for during the one before waits that long; a lone call reads at once', async () => {
    jest.useFakeTimers();
    try {
      let reads = 0;
      const reload = latestRead(
        async () => ++reads,
        () => undefined,
        { burstMs: 30 },
      );
      // Alone: read at once, no timer to wait for.
      await reload();
      expect(reads).toBe(1);
      const first = reload();
      const burst = Array.from({ length: 50 }, () => reload());
      await jest.advanceTimersByTimeAsync(29);
      expect(reads).toBe(2);
      await jest.advanceTimersByTimeAsync(1);
      await Promise.all([first, ...burst]);
      expect(reads).toBe(3);
    } finally {
      jest.useRealTimers();
    }
  });

  it('a failed read rejects its callers and leaves the next call free to read', async () => {
    let fail = true;
    const installed: number[] = [];
    let n = 0;
    const reload = latestRead(
      async () => {
        if (fail) throw new Error('database away');
        return ++n;
      },
      (v) => installed.push(v),
    );
    await expect(reload()).rejects.toThrow('database away');
    fail = false;
    await reload();
    expect(installed).toEqual([1]);
  });
});
