import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, GgmlType, GgufValueType, alignUp } from './format.js';

/** One metadata value, tagged with the GGUF type it is written as. */
export type GgufWriteValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'f32[]'; value: readonly number[] }
  | { type: 'i32[]'; value: readonly number[] };

/** An F32 tensor; `dims` in ggml order (ne0, the fastest-moving index, first). */
export interface GgufWriteTensor {
  name: string;
  dims: readonly number[];
  data: Float32Array;
}

export interface GgufWriteInput {
  /** Written in insertion order; llama.cpp does not care about order, diffs do. */
  metadata: ReadonlyArray<readonly [string, GgufWriteValue]>;
  tensors: readonly GgufWriteTensor[];
  alignment?: number;
}

/** A growable little-endian byte buffer; the test model is small, so simplicity wins. */
class ByteSink {
  private buf = Buffer.alloc(64 * 1024);
  private len = 0;

  private reserve(n: number): number {
    if (this.len + n > this.buf.length) {
      const next = Buffer.alloc(Math.max(this.buf.length * 2, this.len + n));
      this.buf.copy(next, 0, 0, this.len);
      this.buf = next;
    }
    const at = this.len;
    this.len += n;
    return at;
  }

  get length(): number {
    return this.len;
  }

  // reserve() first, then this.buf: it may swap the buffer, and `this.buf.write(…,
  // this.reserve(n))` would write into the old one.
  u8(v: number): void {
    const at = this.reserve(1);
    this.buf.writeUInt8(v, at);
  }
  u32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeUInt32LE(v, at);
  }
  i32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeInt32LE(v, at);
  }
  f32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeFloatLE(v, at);
  }
  u64(v: number): void {
    const at = this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), at);
  }
  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    const at = this.reserve(bytes.length);
    bytes.copy(this.buf, at);
  }
  bytes(b: Uint8Array): void {
    const at = this.reserve(b.length);
    this.buf.set(b, at);
  }
  padTo(alignment: number): void {
    this.reserve(alignUp(this.len, alignment) - this.len); // Buffer.alloc zero-fills
  }
  result(): Buffer {
    return this.buf.subarray(0, this.len);
  }
}

function writeValue(out: ByteSink, v: GgufWriteValue): void {
  switch (v.type) {
    case 'u32':
      out.u32(GgufValueType.UINT32);
      return out.u32(v.value);
    case 'i32':
      out.u32(GgufValueType.INT32);
      return out.i32(v.value);
    case 'f32':
      out.u32(GgufValueType.FLOAT32);
      return out.f32(v.value);
    case 'bool':
      out.u32(GgufValueType.BOOL);
      return out.u8(v.value ? 1 : 0);
    case 'string':
      out.u32(GgufValueType.STRING);
      return out.string(v.value);
    case 'string[]':
      out.u32(GgufValueType.ARRAY);
      out.u32(GgufValueType.STRING);
      out.u64(v.value.length);
      return v.value.forEach((s) => out.string(s));
    case 'f32[]':
      out.u32(GgufValueType.ARRAY);
      out.u32(GgufValueType.FLOAT32);
      out.u64(v.value.length);
      return v.value.forEach((x) => out.f32(x));
    case 'i32[]':
      out.u32(GgufValueType.ARRAY);
      out.u32(GgufValueType.INT32);
      out.u64(v.value.length);
      return v.value.forEach((x) => out.i32(x));
  }
}

/**
 * Serialises a GGUF v3 file with F32 tensors: header, metadata, tensor infos, padding,
 * then each tensor's data padded to the alignment (offsets relative to the data start).
 */
export function encodeGguf(input: GgufWriteInput): Buffer {
  const alignment = input.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  const out = new ByteSink();
  out.u32(GGUF_MAGIC);
  out.u32(GGUF_VERSION);
  out.u64(input.tensors.length);
  out.u64(input.metadata.length);
  for (const [key, value] of input.metadata) {
    out.string(key);
    writeValue(out, value);
  }
  let offset = 0;
  for (const t of input.tensors) {
    const elements = t.dims.reduce((a, b) => a * b, 1);
    if (elements !== t.data.length) {
      throw new Error(`tensor ${t.name}: dims ${t.dims.join('x')} hold ${elements} elements but data has ${t.data.length}`);
    }
    out.string(t.name);
    out.u32(t.dims.length);
    t.dims.forEach((d) => out.u64(d));
    out.u32(GgmlType.F32);
    out.u64(offset);
    offset = alignUp(offset + t.data.byteLength, alignment);
  }
  out.padTo(alignment);
  for (const t of input.tensors) {
    // Float32Array bytes are host-endian; every host llama.cpp runs on is little-endian, as GGUF is.
    out.bytes(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    out.padTo(alignment);
  }
  return out.result();
}
