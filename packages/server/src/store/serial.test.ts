import { describe, expect, it } from '@jest/globals';
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
  it('installs only the newest read: an older one that finishes last is dropped', async () => {
    const resolvers: ((v: string) => void)[] = [];
    const installed: string[] = [];
    const reload = latestRead(
      () => new Promise<string>((r) => resolvers.push(r)),
      (v) => installed.push(v),
    );
    const older = reload();
    const newer = reload();
    resolvers[1]!('after the revocation');
    await newer;
    resolvers[0]!('before the revocation');
    await older;
    expect(installed).toEqual(['after the revocation']);
  });
});
