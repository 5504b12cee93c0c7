import { describe, expect, it } from '@jest/globals';
import { PrefillQueue, PrefixCache } from './prefix-cache.js';

/** `n` distinct tokens starting at `from`, named with `tag`. */
const tokens = (tag: string, n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `${tag}${from + i}`);

/** Looks a prompt up and, as after its prefill, caches it; returns the cached tokens. */
function serve(cache: PrefixCache, prompt: readonly string[]): number {
  const names = cache.blockNames(prompt);
  const hit = cache.lookup(names, prompt.length);
  cache.insert(names);
  return hit;
}

describe('PrefixCache', () => {
  it('finds a repeated prompt, all but its last token, in whole blocks', () => {
    const cache = new PrefixCache(1024, 16);
    const prompt = tokens('a', 100);
    expect(serve(cache, prompt)).toBe(0);
    // 99 tokens may match (the last is always computed): 6 whole blocks of 16.
    expect(serve(cache, prompt)).toBe(96);
    expect(serve(cache, tokens('a', 96))).toBe(80);
  });

  it('matches a shared prefix up to the first different block, and nothing after a different start', () => {
    const cache = new PrefixCache(1024, 16);
    serve(cache, tokens('a', 64));
    expect(serve(cache, [...tokens('a', 40), ...tokens('q', 30)])).toBe(32);
    // Chained names: the same later blocks behind a different first block are not a match.
    expect(serve(cache, ['other', ...tokens('a', 63, 1)])).toBe(0);
  });

  it('evicts the least recently used blocks beyond its capacity, a prefix tail first', () => {
    const cache = new PrefixCache(6 * 16, 16);
    const a = tokens('a', 4 * 16 + 1);
    const b = tokens('b', 4 * 16 + 1);
    serve(cache, a);
    serve(cache, b);
    expect(cache.size).toBe(6);
    // a's last two blocks went, its first two stayed.
    expect(serve(cache, a)).toBe(2 * 16);
    expect(serve(cache, b)).toBe(2 * 16);
  });

  it('caches nothing with capacity 0', () => {
    const cache = new PrefixCache(0, 16);
    serve(cache, tokens('a', 50));
    expect([serve(cache, tokens('a', 50)), cache.size]).toEqual([0, 0]);
  });
});

/** A prefill wait the test ends by hand, recording the times asked for. */
function manualWait(): { asked: number[]; finish: () => void; wait: (ms: number, signal: AbortSignal) => Promise<void> } {
  const asked: number[] = [];
  const pending: Array<() => void> = [];
  return {
    asked,
    finish: () => pending.shift()?.(),
    wait: (ms, signal) =>
      new Promise((resolve, reject) => {
        asked.push(ms);
        pending.push(resolve);
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
  };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('PrefillQueue', () => {
  it('takes uncached tokens / rate per prefill, one prefill at a time in arrival order', async () => {
    const w = manualWait();
    const queue = new PrefillQueue(10_000, w.wait);
    const order: string[] = [];
    const never = new AbortController().signal;
    const first = queue.run(
      never,
      () => (order.push('start 1'), 2000),
      () => order.push('done 1'),
    );
    const second = queue.run(
      never,
      () => (order.push('start 2'), 500),
      () => order.push('done 2'),
    );
    await tick();
    expect([order, w.asked]).toEqual([['start 1'], [200]]);
    w.finish();
    await tick();
    expect([order, w.asked]).toEqual([
      ['start 1', 'done 1', 'start 2'],
      [200, 50],
    ]);
    w.finish();
    await expect(Promise.all([first, second])).resolves.toEqual([true, true]);
    expect(order).toEqual(['start 1', 'done 1', 'start 2', 'done 2']);
  });

  it('lets a client that left stop waiting at once without letting the next one overtake the current prefill', async () => {
    const w = manualWait();
    const queue = new PrefillQueue(1000, w.wait);
    const order: string[] = [];
    const never = new AbortController().signal;
    const gone = new AbortController();
    const first = queue.run(
      never,
      () => (order.push('start 1'), 10),
      () => order.push('done 1'),
    );
    const left = queue.run(
      gone.signal,
      () => (order.push('start 2'), 10),
      () => order.push('done 2'),
    );
    const third = queue.run(
      never,
      () => (order.push('start 3'), 10),
      () => order.push('done 3'),
    );
    gone.abort();
    await expect(left).resolves.toBe(false);
    await tick();
    expect(order).toEqual(['start 1']);
    w.finish();
    await first;
    await tick();
    expect(order).toEqual(['start 1', 'done 1', 'start 3']);
    w.finish();
    await expect(third).resolves.toBe(true);
  });

  it('is instant at rate 0: no wait and no queue', async () => {
    const w = manualWait();
    const queue = new PrefillQueue(0, w.wait);
    let done = 0;
    await expect(
      queue.run(
        new AbortController().signal,
        () => 5000,
        () => done++,
      ),
    ).resolves.toBe(true);
    expect([done, w.asked]).toEqual([1, []]);
  });
});
