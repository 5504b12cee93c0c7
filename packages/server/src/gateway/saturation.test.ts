import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { allSaturated, estimatedWaitS, everySaturated, isSaturated, pressures, retryAfterS } from './saturation.js';

const s = { maxWaitMs: 250, maxInFlight: 4 };

describe('saturation', () => {
  it('is an estimated queue wait above the bound: uncached tokens in flight ÷ prefill rate', () => {
    expect(estimatedWaitS({ uncachedTokens: 5000, prefillRate: 20_000, inFlight: 5 })).toBe(0.25);
    expect(isSaturated({ uncachedTokens: 5000, prefillRate: 20_000, inFlight: 5 }, s)).toBe(false);
    expect(isSaturated({ uncachedTokens: 5001, prefillRate: 20_000, inFlight: 5 }, s)).toBe(true);
    // Decoding requests hold no prefill: many in flight, nothing queued, not saturated.
    expect(isSaturated({ uncachedTokens: 0, prefillRate: 20_000, inFlight: 100 }, s)).toBe(false);
  });

  it('falls back to requests in flight for an engine with no measured rate', () => {
    expect(estimatedWaitS({ uncachedTokens: 1e6, inFlight: 3 })).toBeUndefined();
    expect(isSaturated({ uncachedTokens: 1e6, inFlight: 3 }, s)).toBe(false);
    expect(isSaturated({ uncachedTokens: 0, inFlight: 4 }, s)).toBe(true);
  });

  it('grows monotonically with the load', () => {
    fc.assert(
      fc.property(fc.nat(1e7), fc.nat(1e7), fc.integer({ min: 1, max: 1e6 }), fc.nat(100), (a, b, rate, n) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        if (isSaturated({ uncachedTokens: lo, prefillRate: rate, inFlight: n }, s))
          expect(isSaturated({ uncachedTokens: hi, prefillRate: rate, inFlight: n }, s)).toBe(true);
      }),
    );
  });

  it('holds a request only when there is a replica and every one is saturated', () => {
    const busy = { uncachedTokens: 1e6, prefillRate: 1000, inFlight: 1 };
    const idle = { uncachedTokens: 0, prefillRate: 1000, inFlight: 0 };
    expect(allSaturated([], s)).toBe(false);
    expect(allSaturated([busy, idle], s)).toBe(false);
    expect(allSaturated([busy, busy], s)).toBe(true);
  });

  it('decides as allSaturated over the pressures when read replica by replica, skipping replicas not eligible', () => {
    const replica = fc.record({
      uncached: fc.nat(20_000),
      rate: fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: undefined }),
      inFlight: fc.nat(8),
      eligible: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(replica, { maxLength: 6 }), (rs) => {
        const ids = rs.map((_, i) => ({ replicaId: `r-${i}` }));
        const at = (id: string) => rs[Number(id.slice(2))]!;
        const load = { uncached: (id: string) => at(id).uncached, rate: (id: string) => at(id).rate, inFlight: (id: string) => at(id).inFlight };
        const eligible = ids.filter((t) => at(t.replicaId).eligible).map((t) => t.replicaId);
        const expected = allSaturated(pressures(eligible, load.uncached, load.rate, load.inFlight), s);
        expect(everySaturated(ids, (id) => at(id).eligible, load, s)).toBe(expected);
      }),
    );
  });

  it('gives a replica not measured yet the mean rate of those that are', () => {
    const rates: Record<string, number> = { a: 1000, b: 3000 };
    const ps = pressures(
      ['a', 'b', 'c'],
      () => 600,
      (id) => rates[id],
      () => 1,
    );
    expect(ps.map((p) => p.prefillRate)).toEqual([1000, 3000, 2000]);
    expect(
      pressures(
        ['x'],
        () => 0,
        () => undefined,
        () => 2,
      ),
    ).toEqual([{ uncachedTokens: 0, inFlight: 2 }]);
  });

  it('says when to come back from the tokens ahead and the summed rate, within 1–60 s', () => {
    const ps = [
      { uncachedTokens: 0, prefillRate: 1000, inFlight: 0 },
      { uncachedTokens: 0, prefillRate: 1000, inFlight: 0 },
    ];
    expect(retryAfterS(10_000, ps)).toBe(5);
    expect(retryAfterS(1, ps)).toBe(1);
    expect(retryAfterS(1e9, ps)).toBe(60);
    expect(retryAfterS(1e9, [{ uncachedTokens: 0, inFlight: 9 }])).toBe(1);
  });
});
