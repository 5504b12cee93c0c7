import { describe, expect, it } from '@jest/globals';
import { editDistance } from './suggest.js';

describe('editDistance', () => {
  it.each([
    ['', '', 0],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['qwen', 'qwen', 0],
    ['kitten', 'sitting', 3],
    ['engin', 'engine', 1],
    ['flaw', 'lawn', 2],
    ['ab', 'ba', 2],
  ])('%j to %j is %d', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
});

describe('editDistance with a bound', () => {
  it('is exact up to the bound and gives up past it', () => {
    expect(editDistance('kitten', 'sitting', 3)).toBe(3);
    expect(editDistance('kitten', 'sitting', 2)).toBe(3);
    expect(editDistance('abcdef', 'uvwxyz', 1)).toBe(2);
  });

  it('does not compare a huge input with a short name at all', () => {
    const huge = 'q'.repeat(10 * 1024 * 1024);
    const t0 = performance.now();
    expect(editDistance(huge, 'llama-3.1-8b', 4)).toBe(5);
    // Constant time: the lengths alone decide (a full comparison takes seconds).
    expect(performance.now() - t0).toBeLessThan(50);
  });
});
