import { describe, expect, it } from '@jest/globals';
import { QueueAbortedError, SlotPool } from './pool.js';

describe('SlotPool', () => {
  it('hands out free slots, then queues first come first served', async () => {
    const pool = new SlotPool(['a', 'b']);
    const got = [await pool.acquire(), await pool.acquire()];
    expect(got.sort()).toEqual(['a', 'b']);
    const order: string[] = [];
    const third = pool.acquire().then((s) => order.push(`third:${s}`));
    const fourth = pool.acquire().then((s) => order.push(`fourth:${s}`));
    expect(pool.queued).toBe(2);
    expect(pool.busy).toBe(2);
    pool.release('a');
    pool.release('b');
    await Promise.all([third, fourth]);
    expect(order).toEqual(['third:a', 'fourth:b']);
  });

  it('drops a waiter whose client left, so it never takes a slot', async () => {
    const pool = new SlotPool(['only']);
    await pool.acquire();
    const gone = new AbortController();
    const waiting = pool.acquire(gone.signal);
    const next = pool.acquire();
    gone.abort();
    await expect(waiting).rejects.toThrow(QueueAbortedError);
    expect(pool.queued).toBe(1);
    pool.release('only');
    await expect(next).resolves.toBe('only');
    await expect(pool.acquire(gone.signal)).rejects.toThrow(QueueAbortedError);
  });

  it('lets the caller choose among free slots, least recently released first', async () => {
    const pool = new SlotPool(['a', 'b', 'c']);
    const seen: string[][] = [];
    const held = [await pool.acquire(), await pool.acquire(), await pool.acquire()];
    for (const s of ['b', 'a', 'c']) pool.release(s);
    const chosen = await pool.acquire(undefined, (free) => {
      seen.push([...free]);
      return free.indexOf('a');
    });
    expect([chosen, seen]).toEqual(['a', [['b', 'a', 'c']]]);
    // An index out of range still hands out a free slot (the default, the last released).
    expect(await pool.acquire(undefined, () => 7)).toBe('c');
    expect([pool.busy, held.length]).toEqual([2, 3]);
  });
});
