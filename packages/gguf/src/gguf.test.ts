import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { estimateForSource } from './source-estimate.js';
import { estimateWorkingSetMb, workingSet, OVERHEAD_FIXED_MIB } from './estimate.js';
import { GgufFormatError, readGgufHeader, readGgufHeaderSync } from './header.js';
import type { GgufHeader } from './header.js';
import { TEST_MODEL_NAME, TEST_MODEL_SHAPE, buildTestModel, writeTestModel } from './test-model.js';
import { encodeGguf } from './writer.js';
import { buildTestLora } from './test-lora.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'llmgw-gguf-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MIB = 1024 * 1024;
const { embeddingLength: E, feedForwardLength: F, blockCount, headCount, headCountKv, vocabSize: V } = TEST_MODEL_SHAPE;
const headDim = E / headCount;
// token_embd + output + output_norm, then per block: 2 norms, q, k, v, o, gate, up, down.
const EXPECTED_PARAMS = 2 * E * V + E + blockCount * (2 * E + E * E + 2 * E * headCountKv * headDim + E * E + 3 * E * F);

describe('writeTestModel', () => {
  it('is deterministic per seed', () => {
    expect(buildTestModel({ seed: 5 }).equals(buildTestModel({ seed: 5 }))).toBe(true);
    expect(buildTestModel({ seed: 5 }).equals(buildTestModel({ seed: 6 }))).toBe(false);
  });

  it('writes a file whose header reads back with the shape it was built with', async () => {
    const file = path.join(dir, 'nested', 'model.gguf');
    const written = writeTestModel(file, { seed: 3 });
    expect(written.path).toBe(file);
    const h = await readGgufHeader(file);
    expect(h).toMatchObject({
      version: 3,
      architecture: 'llama',
      name: TEST_MODEL_NAME,
      parameterCount: EXPECTED_PARAMS,
      tensorCount: 3 + 9 * blockCount,
      contextLength: 1024,
      blockCount: 2,
      headCount: 4,
      headCountKv: 2,
      embeddingLength: 64,
      keyLength: 16,
      valueLength: 16,
      fileSizeBytes: written.sizeBytes,
    });
    expect(h.dataOffset % 32).toBe(0);
    expect(h.metadata['tokenizer.ggml.model']).toBe('llama');
    expect(h.metadata['tokenizer.ggml.tokens']).toEqual({ kind: 'array', elementType: 8, length: V });
    expect(h.metadata['tokenizer.chat_template']).toContain('<|im_start|>');
    // The same header whether read from bytes or from the file.
    expect(readGgufHeaderSync(buildTestModel({ seed: 3 }))).toEqual(h);
  });
});

describe('readGgufHeader errors', () => {
  const bytes = buildTestModel();
  const header = readGgufHeaderSync(bytes);

  it('reports a file cut inside the header as truncated', async () => {
    const file = path.join(dir, 'cut-header.gguf');
    writeFileSync(file, bytes.subarray(0, 5000));
    await expect(readGgufHeader(file)).rejects.toThrow(GgufFormatError);
    await expect(readGgufHeader(file)).rejects.toThrow(/^truncated GGUF: .* the file ends at byte 5000$/);
  });

  it('reports a file cut inside the weights as truncated', async () => {
    const file = path.join(dir, 'cut-data.gguf');
    writeFileSync(file, bytes.subarray(0, header.dataOffset + 1000));
    await expect(readGgufHeader(file)).rejects.toThrow(/^truncated GGUF: the tensors need \d+ bytes but the file has \d+$/);
  });

  it('refuses something that is not a GGUF', async () => {
    const file = path.join(dir, 'not.gguf');
    writeFileSync(file, '{"not": "a model"}');
    await expect(readGgufHeader(file)).rejects.toThrow('not a GGUF file: it starts with "{"no", not "GGUF"');
    expect(() => readGgufHeaderSync(Buffer.from('GG'))).toThrow(/truncated GGUF: magic/);
  });

  it('passes on fs errors for a missing file', async () => {
    await expect(readGgufHeader(path.join(dir, 'absent.gguf'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('reads a header larger than its first read (big vocabularies)', async () => {
    const tokens = Array.from({ length: 200_000 }, (_, i) => `token-${i}`);
    const big = encodeGguf({
      metadata: [
        ['general.architecture', { type: 'string', value: 'llama' }],
        ['tokenizer.ggml.tokens', { type: 'string[]', value: tokens }],
        ['llama.block_count', { type: 'u32', value: 1 }],
      ],
      tensors: [{ name: 'x', dims: [4, 2], data: new Float32Array(8) }],
    });
    expect(big.length).toBeGreaterThan(2 * MIB);
    const file = path.join(dir, 'big.gguf');
    writeFileSync(file, big);
    const h = await readGgufHeader(file);
    expect(h.metadata['tokenizer.ggml.tokens']).toEqual({ kind: 'array', elementType: 8, length: 200_000 });
    expect(h.parameterCount).toBe(8);
    expect(h.blockCount).toBe(1);
    expect(h.contextLength).toBeUndefined();
  });
});

describe('estimateWorkingSetMb', () => {
  it('matches reference agent.md §4 for a Llama-3.1-8B-shaped model: 1 GiB of fp16 KV at 8k', () => {
    const llama8b: GgufHeader = {
      version: 3,
      architecture: 'llama',
      parameterCount: 8.03e9,
      tensorCount: 291,
      contextLength: 131072,
      blockCount: 32,
      headCount: 32,
      headCountKv: 8,
      embeddingLength: 4096,
      keyLength: 128,
      valueLength: 128,
      fileSizeBytes: 4.58 * 1024 * MIB,
      dataOffset: 0,
      metadata: {},
    };
    const ws = workingSet(llama8b, { contextLength: 8192 });
    expect(ws.kvCacheMb).toBe(1024);
    expect(ws.weightsMb).toBeCloseTo(4.58 * 1024, 0);
    const expected = Math.ceil((4.58 * 1024 + 1024) * 1.1 + OVERHEAD_FIXED_MIB);
    expect(estimateWorkingSetMb(llama8b, { contextLength: 8192 })).toBe(expected);
    // q8_0 KV halves the cache; two sequences double it.
    expect(workingSet(llama8b, { contextLength: 8192, kvBytesPerElement: 1 }).kvCacheMb).toBe(512);
    expect(workingSet(llama8b, { contextLength: 8192, sequences: 2 }).kvCacheMb).toBe(2048);
    // Without a context the model's trained one is used: 16 GiB at 128k.
    expect(workingSet(llama8b).kvCacheMb).toBe(16 * 1024);
  });

  it('adds the overhead to a tiny model', () => {
    const h = readGgufHeaderSync(buildTestModel());
    const kvBytes = 2 * blockCount * 1024 * headCountKv * headDim * 2;
    const weights = h.fileSizeBytes / MIB;
    expect(estimateWorkingSetMb(h)).toBe(Math.ceil((weights + kvBytes / MIB) * 1.1 + 256));
  });
});

describe('estimateForSource', () => {
  it('estimates a GGUF at the engine defaults: 1024 tokens, 2 sequences + the embedding one', async () => {
    const file = path.join(dir, 'estimate.gguf');
    writeTestModel(file);
    const e = await estimateForSource(file);
    expect(e).toMatchObject({ contextLength: 1024, sequences: 3, header: { architecture: 'llama', parameterCount: EXPECTED_PARAMS } });
    expect(e?.kvCacheMb).toBeCloseTo((3 * 2 * blockCount * 1024 * headCountKv * headDim * 2) / MIB, 1);
    expect(e?.totalMb).toBeGreaterThan(256);
    const bigger = await estimateForSource(file, { contextSize: 4096, parallel: 4 });
    expect(bigger).toMatchObject({ contextLength: 4096, sequences: 5 });
  });

  it('is undefined for a missing, foreign or truncated file', async () => {
    expect(await estimateForSource(path.join(dir, 'absent.gguf'))).toBeUndefined();
    expect(await estimateForSource(path.join(dir, 'not.gguf'))).toBeUndefined();
    expect(await estimateForSource(path.join(dir, 'cut-data.gguf'))).toBeUndefined();
  });

  it('sums the parts of a split model', async () => {
    const part = (n: number): Buffer =>
      encodeGguf({
        metadata: [
          ['general.architecture', { type: 'string', value: 'llama' }],
          ['split.count', { type: 'u32', value: 2 }],
          ['split.no', { type: 'u32', value: n }],
        ],
        tensors: [{ name: `t${n}`, dims: [10, 10], data: new Float32Array(100) }],
      });
    const first = path.join(dir, 'm-00001-of-00002.gguf');
    writeFileSync(first, part(0));
    writeFileSync(path.join(dir, 'm-00002-of-00002.gguf'), part(1));
    const e = await estimateForSource(first);
    expect(e?.header.parameterCount).toBe(200);
    expect(e?.header.fileSizeBytes).toBe(part(0).length + part(1).length);
    rmSync(path.join(dir, 'm-00002-of-00002.gguf'));
    expect(await estimateForSource(first)).toBeUndefined();
  });
});

describe('buildTestLora', () => {
  it('is a llama adapter GGUF with an a/b pair per block, the same bytes for a seed', () => {
    const h = readGgufHeaderSync(buildTestLora());
    expect(h.architecture).toBe('llama');
    expect(h.name).toBe('llmgw-test-lora');
    const { embeddingLength: E, feedForwardLength: F, blockCount } = TEST_MODEL_SHAPE;
    expect(h.tensorCount).toBe(2 * blockCount);
    expect(h.parameterCount).toBe(blockCount * (E * 4 + 4 * F));
    expect(buildTestLora({ seed: 2 }).equals(buildTestLora({ seed: 2 }))).toBe(true);
    expect(buildTestLora({ seed: 2 }).equals(buildTestLora({ seed: 3 }))).toBe(false);
    expect(readGgufHeaderSync(buildTestLora({ rank: 8 })).parameterCount).toBe(blockCount * (E * 8 + 8 * F));
  });
});
