/**
 * GGUF v3 constants (ggml `docs/gguf.md`). Everything is little-endian; a string is a
 * u64 byte length followed by UTF-8 without a terminator.
 */

/** The bytes `GGUF` read as a little-endian u32. */
export const GGUF_MAGIC = 0x46554747;

/** Version written by {@link writeTestModel}; the reader also accepts 2 (same layout). */
export const GGUF_VERSION = 3;

/** Alignment of the tensor data when `general.alignment` is absent. */
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Type tags of metadata values. */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

export type GgufValueTypeId = (typeof GgufValueType)[keyof typeof GgufValueType];

/** Byte width of each fixed-size metadata type; strings and arrays are variable. */
export const GGUF_SCALAR_BYTES: Readonly<Record<number, number>> = {
  [GgufValueType.UINT8]: 1,
  [GgufValueType.INT8]: 1,
  [GgufValueType.UINT16]: 2,
  [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4,
  [GgufValueType.INT32]: 4,
  [GgufValueType.FLOAT32]: 4,
  [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8,
  [GgufValueType.INT64]: 8,
  [GgufValueType.FLOAT64]: 8,
};

/** The ggml tensor types the writer produces. */
export const GgmlType = {
  F32: 0,
  F16: 1,
} as const;

/**
 * [elements per block, bytes per block] for each ggml tensor type, so a reader can tell
 * where a tensor's data ends without loading ggml. Checked against the prebuilt
 * llama.cpp of node-llama-cpp 3.21.1 (`getTypeSizeForGgmlType`/`getBlockSizeForGgmlType`).
 * Types missing here (removed or future ones) are simply not bounds-checked.
 */
export const GGML_TYPE_BLOCKS: Readonly<Record<number, readonly [number, number]>> = {
  0: [1, 4], // F32
  1: [1, 2], // F16
  2: [32, 18], // Q4_0
  3: [32, 20], // Q4_1
  6: [32, 22], // Q5_0
  7: [32, 24], // Q5_1
  8: [32, 34], // Q8_0
  9: [32, 36], // Q8_1
  10: [256, 84], // Q2_K
  11: [256, 110], // Q3_K
  12: [256, 144], // Q4_K
  13: [256, 176], // Q5_K
  14: [256, 210], // Q6_K
  15: [256, 292], // Q8_K
  16: [256, 66], // IQ2_XXS
  17: [256, 74], // IQ2_XS
  18: [256, 98], // IQ3_XXS
  19: [256, 50], // IQ1_S
  20: [32, 18], // IQ4_NL
  21: [256, 110], // IQ3_S
  22: [256, 82], // IQ2_S
  23: [256, 136], // IQ4_XS
  24: [1, 1], // I8
  25: [1, 2], // I16
  26: [1, 4], // I32
  27: [1, 8], // I64
  28: [1, 8], // F64
  29: [256, 56], // IQ1_M
  30: [1, 2], // BF16
  34: [256, 54], // TQ1_0
  35: [256, 66], // TQ2_0
  39: [32, 17], // MXFP4
};

/** Rounds `n` up to a multiple of `alignment`. */
export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
