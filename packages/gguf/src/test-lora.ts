import { TEST_MODEL_SHAPE, prng, writeWhole, type WrittenModel } from './test-model.js';
import { encodeGguf, type GgufWriteTensor } from './writer.js';

export interface TestLoraOptions {
  /** Seeds the adapter's weights; the same seed always gives the same bytes. Default 7. */
  seed?: number;
  /** The adapter's rank (the inner size of each `lora_a`/`lora_b` pair). Default 4. */
  rank?: number;
}

/**
 * The bytes of a LoRA adapter GGUF for the test model ({@link buildTestModel}), as
 * llama.cpp's `convert_lora_to_gguf.py` writes one: `general.type = adapter`,
 * `adapter.type = lora`, `adapter.lora.alpha`, and a `<tensor>.lora_a` / `.lora_b` pair
 * for each adapted weight (a: [inputs, rank], b: [rank, outputs], ggml order, so the
 * delta is b·a scaled by alpha / rank). It adapts every block's `ffn_up`, whose outputs
 * feed `ffn_down` (the row the model's printable-only guard keeps at zero stays so), with
 * a delta as large as the weight itself: greedy output changes, and stays printable.
 * Issue 31: a real adapter end to end on the CPU.
 */
export function buildTestLora(options: TestLoraOptions = {}): Buffer {
  const rank = options.rank ?? 4;
  const next = prng(options.seed ?? 7);
  const uniform = () => next() * 2 - 1;
  const { embeddingLength: E, feedForwardLength: F, blockCount } = TEST_MODEL_SHAPE;
  const random = (name: string, dims: readonly [number, number], scale: number): GgufWriteTensor => {
    const data = new Float32Array(dims[0] * dims[1]);
    for (let i = 0; i < data.length; i++) data[i] = uniform() * scale;
    return { name, dims, data };
  };
  const tensors: GgufWriteTensor[] = [];
  for (let i = 0; i < blockCount; i++) {
    // Each product term is about (1/sqrt(E))·(2/sqrt(rank)): the delta's entries are of
    // the order of the base weight's (std 1/sqrt(E)).
    tensors.push(random(`blk.${i}.ffn_up.weight.lora_a`, [E, rank], 3 / Math.sqrt(E)), random(`blk.${i}.ffn_up.weight.lora_b`, [rank, F], 3 / Math.sqrt(rank)));
  }
  return encodeGguf({
    metadata: [
      ['general.architecture', { type: 'string', value: 'llama' }],
      ['general.type', { type: 'string', value: 'adapter' }],
      ['general.name', { type: 'string', value: 'llmgw-test-lora' }],
      ['general.alignment', { type: 'u32', value: 32 }],
      ['adapter.type', { type: 'string', value: 'lora' }],
      // alpha = rank: the scale alpha / rank is 1.
      ['adapter.lora.alpha', { type: 'f32', value: rank }],
    ],
    tensors,
    alignment: 32,
  });
}

/** Writes {@link buildTestLora}'s bytes to `file` through a temporary file and a rename, like {@link writeTestModel}. */
export function writeTestLora(file: string, options: TestLoraOptions = {}): WrittenModel {
  return writeWhole(file, buildTestLora(options));
}
