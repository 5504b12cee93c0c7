import { describe, expect, it } from '@jest/globals';
import { SLOT_PROMPT_SIMILARITY, chooseSlot, reusedTokens } from './reuse.js';

describe('chooseSlot', () => {
  it('takes the free slot sharing the longest prefix with the prompt', () => {
    expect(chooseSlot([3, 600, 40], 700)).toBe(1);
  });

  it('takes the least recently used slot (the first) when no prefix is long enough, or on a tie', () => {
    // Only the chat template's opening tokens in common: keep the other conversations.
    expect(chooseSlot([0, 5, 6], 700)).toBe(0);
    expect(chooseSlot([0, 0], 10)).toBe(0);
    expect(chooseSlot([2, 400, 400], 700)).toBe(1);
    const least = Math.ceil(SLOT_PROMPT_SIMILARITY * 700);
    expect([chooseSlot([0, least - 1], 700), chooseSlot([0, least], 700)]).toEqual([0, 1]);
  });
});

describe('reusedTokens', () => {
  it('counts the common prefix, but never the last prompt token, which is always evaluated', () => {
    expect(reusedTokens(945, 963)).toBe(945);
    expect(reusedTokens(961, 961)).toBe(960);
    expect(reusedTokens(1200, 961)).toBe(960);
    expect(reusedTokens(0, 1)).toBe(0);
  });
});
