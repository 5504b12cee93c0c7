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
