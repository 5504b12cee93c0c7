import { describe, expect, it } from '@jest/globals';
import { GgufFormatError, readGgufHeaderAt, readGgufHeaderSync } from './header.js';
import { buildTestModel } from './test-model.js';
import { encodeGguf } from './writer.js';

/** `readGgufHeaderAt`: a header read through a reader of first bytes, as over HTTP Range. */
describe('readGgufHeaderAt', () => {
  const bytes = buildTestModel({ seed: 1 });
  const reader = (file: Buffer, asked: number[]) => (n: number) => {
    asked.push(n);
    return Promise.resolve(file.subarray(0, n));
  };

  it('reads a small file once, and gives the header the whole file gives', async () => {
    const asked: number[] = [];
    expect(await readGgufHeaderAt(bytes.length, reader(bytes, asked))).toEqual(readGgufHeaderSync(bytes));
    expect(asked).toEqual([Math.min(bytes.length, 1 << 20)]);
  });

  it('asks for more only while the header goes on, never for the weights', async () => {
    // A vocabulary of 2 MB of strings puts the header past the first read.
    const big = encodeGguf({
      metadata: [
        ['general.architecture', { type: 'string', value: 'llama' }],
        ['tokenizer.ggml.tokens', { type: 'string[]', value: Array.from({ length: 200_000 }, (_, i) => `token-${i}`) }],
      ],
      tensors: [{ name: 'w', dims: [1 << 20], data: new Float32Array(1 << 20) }],
    });
    const asked: number[] = [];
    const h = await readGgufHeaderAt(big.length, reader(big, asked));
    expect(h.architecture).toBe('llama');
    expect(asked[0]).toBe(1 << 20);
    expect(asked.length).toBeGreaterThan(1);
    expect(asked.at(-1)!).toBeLessThan(big.length);
  });

  it('refuses a short read rather than asking again forever', async () => {
    await expect(readGgufHeaderAt(bytes.length, () => Promise.resolve(bytes.subarray(0, 10)))).rejects.toThrow(
      new GgufFormatError(`only 10 of the first ${bytes.length} bytes could be read`),
    );
  });
});
