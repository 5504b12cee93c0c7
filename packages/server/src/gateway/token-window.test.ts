import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { TokenWindow } from './token-window.js';

const adds = fc.array(fc.record({ dt: fc.integer({ min: 0, max: 5000 }), tokens: fc.integer({ min: 0, max: 10_000 }) }), { maxLength: 200 });

describe('TokenWindow', () => {
  it('counts the tokens of the last minute, to within one bucket of age', () => {
    fc.assert(
      fc.property(adds, fc.integer({ min: 0, max: 120_000 }), (xs, after) => {
        const w = new TokenWindow();
        const seen: { at: number; tokens: number }[] = [];
        let now = 1_000_000;
        for (const x of xs) {
          now += x.dt;
          w.add(x.tokens, now);
          seen.push({ at: now, tokens: x.tokens });
          const exact = (span: number) => seen.filter((s) => s.at > now - span).reduce((n, s) => n + s.tokens, 0);
          expect(w.total(now)).toBeGreaterThanOrEqual(exact(60_000));
          expect(w.total(now)).toBeLessThanOrEqual(exact(61_000));
        }
        const later = now + after;
        const exactLater = (span: number) => seen.filter((s) => s.at > later - span).reduce((n, s) => n + s.tokens, 0);
        expect(w.total(later)).toBeGreaterThanOrEqual(exactLater(60_000));
        expect(w.total(later)).toBeLessThanOrEqual(exactLater(61_000));
      }),
    );
  });

  it('says the whole seconds until the window is under a limit: under it then, not a second sooner', () => {
    fc.assert(
      fc.property(adds, fc.integer({ min: 1, max: 200_000 }), (xs, limit) => {
        const w = new TokenWindow();
        let now = 5_000_000;
        for (const x of xs) w.add(x.tokens, (now += x.dt));
        const s = w.retryAfterS(limit, now);
        if (s === 0) return expect(w.total(now)).toBeLessThan(limit);
        // The window and the one bucket its start is inside.
        expect(s).toBeLessThanOrEqual(61);
        expect(w.total(now + s * 1000)).toBeLessThan(limit);
        expect(w.total(now + (s - 1) * 1000)).toBeGreaterThanOrEqual(limit);
      }),
    );
  });

  it('keeps a fixed size and forgets a bucket reused a minute later', () => {
    const w = new TokenWindow();
    w.add(100, 0);
    w.add(7, 30_000);
    expect(w.total(60_000)).toBe(107);
    // 61 buckets: the one of 61 s is the slot of 0 s again, and starts empty.
    w.add(50, 61_000);
    expect(w.total(61_000)).toBe(57);
    w.add(-5, 61_000);
    w.add(Number.NaN, 61_000);
    expect(w.total(61_500)).toBe(57);
    expect(w.total(122_000)).toBe(0);
  });
});
