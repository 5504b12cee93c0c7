import { describe, expect, it } from '@jest/globals';
import { openai } from '@llmgw/engine-http';
import { EMBEDDING_DIM, countWords, embed, planGeneration } from './generate.js';

const { embeddingToBase64 } = openai;

describe('planGeneration', () => {
  it('echoes the prompt once and stops', () => {
    expect(planGeneration('  hello \n world ', { maxTokens: 16 })).toEqual({ tokens: ['echo:', ' hello', ' world'], finishReason: 'stop' });
  });

  it('cuts at maxTokens with finish_reason length', () => {
    expect(planGeneration('a b c', { maxTokens: 2 })).toEqual({ tokens: ['echo:', ' a'], finishReason: 'length' });
  });

  it('stops, not length, when the reply exactly fills maxTokens', () => {
    expect(planGeneration('a', { maxTokens: 2 }).finishReason).toBe('stop');
  });

  it('cycles for min_tokens and ignore_eos', () => {
    expect(planGeneration('a', { maxTokens: 10, minTokens: 5 })).toEqual({ tokens: ['echo:', ' a', ' echo:', ' a', ' echo:'], finishReason: 'stop' });
    const long = planGeneration('a', { maxTokens: 7, ignoreEos: true });
    expect(long.tokens.join('')).toBe('echo: a echo: a echo: a echo:');
    expect(long.finishReason).toBe('length');
  });

  it('replies "echo:" to an empty prompt', () => {
    expect(planGeneration('', { maxTokens: 16 })).toEqual({ tokens: ['echo:'], finishReason: 'stop' });
  });
});

describe('embed', () => {
  it('is deterministic, unit length and text-dependent', () => {
    const a = embed('same');
    expect(a).toHaveLength(EMBEDDING_DIM);
    expect(Math.hypot(...a)).toBeCloseTo(1, 12);
    expect(embed('same')).toEqual(a);
    expect(embed('different')).not.toEqual(a);
  });

  it('encodes base64 as little-endian float32', () => {
    const v = embed('x');
    const buf = Buffer.from(embeddingToBase64(v), 'base64');
    const decoded = Array.from({ length: EMBEDDING_DIM }, (_, i) => buf.readFloatLE(i * 4));
    decoded.forEach((d, i) => expect(d).toBeCloseTo(v[i]!, 6));
  });
});

describe('countWords', () => {
  it('splits on any whitespace', () => {
    expect(countWords(' a\tb\n\nc ')).toBe(3);
    expect(countWords('')).toBe(0);
  });
});
