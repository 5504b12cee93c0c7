import type { GgufHeader } from './header.js';

const MIB = 1024 * 1024;

/**
 * Overhead on top of weights and KV cache: 10 % of both, plus 256 MiB. Reference
 * agent.md §4 puts CPU RAM at "GGUF size + KV + ~0.5–1 GiB of compute buffers" and
 * GPUStack adds 20 % + 2 GiB for vLLM on GPUs (CUDA graphs, activations); llama.cpp on a
 * CPU has neither, and its compute buffers grow with the model, hence a proportional
 * part plus a floor for the runtime itself (node + llama.cpp ≈ 85 MiB resident before
 * any model, cpu-engine.md §3).
 */
export const OVERHEAD_FRACTION = 0.1;
export const OVERHEAD_FIXED_MIB = 256;

export interface WorkingSetOptions {
  /** Tokens of context per sequence; default the model's trained context length. */
  contextLength?: number;
  /** Sequences with their own KV cache (parallel requests); default 1. */
  sequences?: number;
  /** Bytes per cached K or V element: 2 for f16 (llama.cpp's default), 1 for q8_0. */
  kvBytesPerElement?: number;
}

/** The estimate split into its parts, all in MiB. */
export interface WorkingSet {
  weightsMb: number;
  kvCacheMb: number;
  overheadMb: number;
  totalMb: number;
  /** The context and sequence count the KV cache was sized for. */
  contextLength: number;
  sequences: number;
}

/**
 * Weights + KV cache + overhead for running `header`'s model, in MiB (1024²).
 *
 * - Weights: the file size, since a GGUF is the weights as they sit in memory (mmap).
 * - KV cache: layers × context × sequences × KV heads × (key width + value width) ×
 *   bytes, i.e. the usual 2 × layers × ctx × kv_heads × head_dim × bytes when keys and
 *   values have the same width. Zero when the header lacks the attention shape.
 * - Overhead: {@link OVERHEAD_FRACTION} of the two plus {@link OVERHEAD_FIXED_MIB}.
 */
export function workingSet(header: GgufHeader, options: WorkingSetOptions = {}): WorkingSet {
  const contextLength = options.contextLength ?? header.contextLength ?? 0;
  const sequences = options.sequences ?? 1;
  const bytes = options.kvBytesPerElement ?? 2;
  const { blockCount, headCountKv, keyLength, valueLength } = header;
  const kvBytes =
    blockCount && headCountKv && keyLength && valueLength ? blockCount * contextLength * sequences * headCountKv * (keyLength + valueLength) * bytes : 0;
  const weightsMb = header.fileSizeBytes / MIB;
  const kvCacheMb = kvBytes / MIB;
  const overheadMb = (weightsMb + kvCacheMb) * OVERHEAD_FRACTION + OVERHEAD_FIXED_MIB;
  return {
    weightsMb: round2(weightsMb),
    kvCacheMb: round2(kvCacheMb),
    overheadMb: round2(overheadMb),
    totalMb: Math.ceil(weightsMb + kvCacheMb + overheadMb),
    contextLength,
    sequences,
  };
}

/** {@link workingSet}'s total: the memory, in whole MiB, a node needs free to run the model. */
export function estimateWorkingSetMb(header: GgufHeader, options: WorkingSetOptions = {}): number {
  return workingSet(header, options).totalMb;
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
