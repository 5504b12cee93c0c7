import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { encodeGguf } from './writer.js';
import type { GgufWriteTensor, GgufWriteValue } from './writer.js';

/** `general.name` of the generated model; the engine serves it under this name by default. */
export const TEST_MODEL_NAME = 'llmgw-test-model';

/** The shape of the generated model (reference cpu-engine.md §2, with grouped-query attention). */
export const TEST_MODEL_SHAPE = {
  embeddingLength: 64,
  feedForwardLength: 128,
  blockCount: 2,
  headCount: 4,
  headCountKv: 2,
  contextLength: 1024,
  vocabSize: 314,
} as const;

export interface TestModelOptions {
  /** Seeds the weights; the same seed always gives the same bytes. Default 1. */
  seed?: number;
}

export interface WrittenModel {
  path: string;
  sizeBytes: number;
}

/** mulberry32: tiny, fast and good enough for weights nobody reads. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function normalSource(seed: number): (std: number) => number {
  const uniform = prng(seed);
  return (std) => {
    // Box–Muller; 1 - u keeps log() away from 0.
    const u = 1 - uniform();
    const v = uniform();
    return std * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
}

/**
 * SentencePiece-style vocabulary: `<unk>`, `<s>`, `</s>`, all 256 byte tokens (SPM
 * falls back to them by exact name, and looks up `<0x0A>` as the newline), `▁`, a–z,
 * `▁a`–`▁z`, then the ChatML markers.
 */
function vocabulary(): { tokens: string[]; scores: number[]; types: number[] } {
  const tokens: string[] = ['<unk>', '<s>', '</s>'];
  const types: number[] = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6);
  }
  const letters = 'abcdefghijklmnopqrstuvwxyz'.split('');
  for (const piece of ['\u2581', ...letters, ...letters.map((l) => `\u2581${l}`)]) {
    tokens.push(piece);
    types.push(1);
  }
  tokens.push('<|im_start|>', '<|im_end|>');
  types.push(3, 3);
  // SPM merges towards higher scores; longer pieces win so "▁a" beats "▁" + "a".
  const scores = tokens.map((t, i) => (types[i] === 1 ? -1 / [...t].length : 0));
  return { tokens, scores, types };
}

const ANCHOR = 4;
const BAN_WEIGHT = 100;

/** Tokens the model may emit: the printable ASCII bytes and the word pieces. */
function printable(token: string, type: number): boolean {
  if (type === 1) return true;
  const hex = /^<0x([0-9A-F]{2})>$/.exec(token)?.[1];
  return type === 6 && hex !== undefined && parseInt(hex, 16) >= 0x20 && parseInt(hex, 16) <= 0x7e;
}

const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * The bytes of a tiny random-weight `llama` GGUF (about 0.45 MB, F32) that llama.cpp
 * loads and runs for real: chat through its ChatML template, completion, embeddings.
 * Its text is noise by design, but printable ASCII that never ends by itself (see the
 * comment on the output rows); what it proves is the path (tokenize, KV cache,
 * sampling, streaming, abort), not the words. Deterministic for a given seed.
 */
export function buildTestModel(options: TestModelOptions = {}): Buffer {
  const seed = options.seed ?? 1;
  const { embeddingLength: E, feedForwardLength: F, blockCount, headCount, headCountKv, contextLength } = TEST_MODEL_SHAPE;
  const headDim = E / headCount;
  const vocab = vocabulary();
  const V = vocab.tokens.length;
  if (V !== TEST_MODEL_SHAPE.vocabSize) throw new Error(`vocabulary has ${V} tokens, expected ${TEST_MODEL_SHAPE.vocabSize}`);
  const eos = 2;
  const imEnd = vocab.tokens.indexOf('<|im_end|>');

  const metadata: Array<[string, GgufWriteValue]> = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: TEST_MODEL_NAME }],
    ['general.alignment', { type: 'u32', value: 32 }],
    ['general.file_type', { type: 'u32', value: 0 }],
    ['llama.context_length', { type: 'u32', value: contextLength }],
    ['llama.embedding_length', { type: 'u32', value: E }],
    ['llama.block_count', { type: 'u32', value: blockCount }],
    ['llama.feed_forward_length', { type: 'u32', value: F }],
    ['llama.attention.head_count', { type: 'u32', value: headCount }],
    ['llama.attention.head_count_kv', { type: 'u32', value: headCountKv }],
    ['llama.rope.dimension_count', { type: 'u32', value: headDim }],
    ['llama.rope.freq_base', { type: 'f32', value: 10000 }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.vocab_size', { type: 'u32', value: V }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: vocab.tokens }],
    ['tokenizer.ggml.scores', { type: 'f32[]', value: vocab.scores }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: vocab.types }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: 1 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: eos }],
    ['tokenizer.ggml.eot_token_id', { type: 'u32', value: imEnd }],
    ['tokenizer.ggml.unknown_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.padding_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
    ['tokenizer.chat_template', { type: 'string', value: CHATML_TEMPLATE }],
  ];

  const normal = normalSource(seed);
  const random = (name: string, dims: readonly number[], std: number): GgufWriteTensor => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = normal(std);
    return { name, dims, data };
  };
  const ones = (name: string, n: number): GgufWriteTensor => ({ name, dims: [n], data: new Float32Array(n).fill(1) });
  // std 1/sqrt(fan-in) keeps activations at unit scale through the random layers.
  const w = (name: string, dims: readonly [number, number]): GgufWriteTensor => random(name, dims, 1 / Math.sqrt(dims[0]));
  // ggml stores [ne0, ne1] with ne0 (the input) contiguous: output o is row o.
  const zeroOutput = (t: GgufWriteTensor, o: number): GgufWriteTensor => {
    const [inputs = 0] = t.dims;
    t.data.fill(0, o * inputs, (o + 1) * inputs);
    return t;
  };

  // Random weights would emit control, EOS and invalid-UTF-8 byte tokens. Instead of a
  // sampler-side ban (node-llama-cpp's TokenBias ignores EOS/EOT), the weights make them
  // impossible: every embedding carries ANCHOR in dimension A, no layer writes to A, so
  // after the final RMS norm A is large and positive at every position, and each banned
  // token's output row is -BAN_WEIGHT on A and 0 elsewhere, a logit near -300 where the
  // printable ones sit within a few units of 0. The model thus talks printable ASCII
  // until max_tokens or a stop sequence, the same under any sampler settings.
  const A = E - 1;
  const embd = random('token_embd.weight', [E, V], 1);
  for (let t = 0; t < V; t++) embd.data[t * E + A] = ANCHOR;
  const output = w('output.weight', [E, V]);
  for (let t = 0; t < V; t++) {
    if (printable(vocab.tokens[t] ?? '', vocab.types[t] ?? 0)) {
      output.data[t * E + A] = 0;
    } else {
      zeroOutput(output, t).data[t * E + A] = -BAN_WEIGHT;
    }
  }

  const tensors: GgufWriteTensor[] = [embd, ones('output_norm.weight', E), output];
  for (let i = 0; i < blockCount; i++) {
    tensors.push(
      ones(`blk.${i}.attn_norm.weight`, E),
      w(`blk.${i}.attn_q.weight`, [E, headCount * headDim]),
      w(`blk.${i}.attn_k.weight`, [E, headCountKv * headDim]),
      w(`blk.${i}.attn_v.weight`, [E, headCountKv * headDim]),
      zeroOutput(w(`blk.${i}.attn_output.weight`, [headCount * headDim, E]), A),
      ones(`blk.${i}.ffn_norm.weight`, E),
      w(`blk.${i}.ffn_gate.weight`, [E, F]),
      w(`blk.${i}.ffn_up.weight`, [E, F]),
      zeroOutput(w(`blk.${i}.ffn_down.weight`, [F, E]), A),
    );
  }
  return encodeGguf({ metadata, tensors, alignment: 32 });
}

/**
 * Writes {@link buildTestModel}'s bytes to `file` (creating its directory). The write
 * goes through a temporary file and a rename, so a concurrent reader never sees half
 * a model.
 */
export function writeTestModel(file: string, options: TestModelOptions = {}): WrittenModel {
  return writeWhole(file, buildTestModel(options));
}

/** Writes `bytes` to `file` (creating its directory) through a temporary file and a rename. */
export function writeWhole(file: string, bytes: Buffer): WrittenModel {
  const target = path.resolve(file);
  mkdirSync(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, target);
  return { path: target, sizeBytes: bytes.length };
}
