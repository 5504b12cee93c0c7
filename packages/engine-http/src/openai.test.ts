import { describe, expect, it } from '@jest/globals';
import { addUsage, usage, usageChunk } from './openai.js';

describe('usage', () => {
  it("carries the cached prompt tokens in OpenAI's prompt_tokens_details, also in the stream's usage chunk", () => {
    const u = usage(120, 8, 96);
    expect(u).toEqual({ prompt_tokens: 120, completion_tokens: 8, total_tokens: 128, prompt_tokens_details: { cached_tokens: 96 } });
    expect(usageChunk({ id: 'c', created: 1, model: 'm' }, 'chat.completion.chunk', u).usage).toEqual(u);
  });

  it('adds up the usages of several prompts, cached tokens included', () => {
    expect(addUsage(usage(10, 2, 0), usage(30, 4, 16))).toEqual(usage(40, 6, 16));
  });
});
