import { open } from 'node:fs/promises';
import { GGML_TYPE_BLOCKS, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_SCALAR_BYTES, GgufValueType, alignUp } from './format.js';

/** A metadata array kept only as its shape: token lists run to hundreds of thousands of strings. */
export interface GgufArraySummary {
  kind: 'array';
  elementType: number;
  length: number;
}

/**
 * A metadata value as read. u64/i64 become numbers (exact below 2^53, which every size
 * and count in a real model is). Numeric arrays of up to {@link MAX_KEPT_ARRAY} elements
 * are kept (per-layer head counts); longer or string arrays are summarised.
 */
export type GgufMetadataValue = string | number | boolean | readonly number[] | GgufArraySummary;

/** Numeric arrays at most this long are kept whole in {@link GgufHeader.metadata}. */
export const MAX_KEPT_ARRAY = 4096;

/** What placement needs from a GGUF, read from its header without touching the weights. */
export interface GgufHeader {
  version: number;
  /** `general.architecture`, e.g. `llama`, `qwen2`. */
  architecture: string;
  /** `general.name` when present. */
  name?: string;
  /** Sum over tensors of their element counts. */
  parameterCount: number;
  tensorCount: number;
  /** `<arch>.context_length`: the context the model was trained for. */
  contextLength?: number;
  /** `<arch>.block_count`: transformer layers. */
  blockCount?: number;
  /** `<arch>.attention.head_count` (the largest, when given per layer). */
  headCount?: number;
  /** `<arch>.attention.head_count_kv`; equals headCount when absent (no grouped-query attention). */
  headCountKv?: number;
  /** `<arch>.embedding_length`. */
  embeddingLength?: number;
  /** Per-head key and value widths: `<arch>.attention.key_length`/`value_length`, else embedding/heads. */
  keyLength?: number;
  valueLength?: number;
  fileSizeBytes: number;
  /** Byte offset where tensor data starts. */
  dataOffset: number;
  metadata: Readonly<Record<string, GgufMetadataValue>>;
}

/** Raised for anything that is not a complete, well-formed GGUF header. */
export class GgufFormatError extends Error {
  override readonly name = 'GgufFormatError';
}

/** Internal: the parse ran off the bytes it was given; the file reader fetches more and retries. */
class NeedMoreBytes extends Error {
  constructor(readonly needed: number) {
    super(`need ${needed} bytes`);
  }
}

// Anything above these is a corrupt or hostile file, not a model; refusing beats a hang.
const MAX_TENSORS = 1_000_000;
const MAX_KVS = 1_000_000;
const MAX_DIMS = 8;

class Cursor {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly fileSize: number,
  ) {}

  private take(n: number, what: string): number {
    const at = this.pos;
    if (at + n > this.fileSize) {
      throw new GgufFormatError(`truncated GGUF: ${what} at byte ${at} needs ${n} bytes but the file ends at byte ${this.fileSize}`);
    }
    if (at + n > this.buf.length) throw new NeedMoreBytes(at + n);
    this.pos += n;
    return at;
  }

  u8(what: string): number {
    return this.buf.readUInt8(this.take(1, what));
  }
  u32(what: string): number {
    return this.buf.readUInt32LE(this.take(4, what));
  }
  u64(what: string): number {
    const v = this.buf.readBigUInt64LE(this.take(8, what));
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufFormatError(`implausible ${what} ${v} at byte ${this.pos - 8}`);
    return Number(v);
  }
  string(what: string): string {
    const len = this.u64(`${what} length`);
    const at = this.take(len, what);
    return this.buf.toString('utf8', at, at + len);
  }
  skip(n: number, what: string): void {
    this.take(n, what);
  }

  scalar(type: number, what: string): string | number | boolean {
    switch (type) {
      case GgufValueType.UINT8:
        return this.buf.readUInt8(this.take(1, what));
      case GgufValueType.INT8:
        return this.buf.readInt8(this.take(1, what));
      case GgufValueType.UINT16:
        return this.buf.readUInt16LE(this.take(2, what));
      case GgufValueType.INT16:
        return this.buf.readInt16LE(this.take(2, what));
      case GgufValueType.UINT32:
        return this.buf.readUInt32LE(this.take(4, what));
      case GgufValueType.INT32:
        return this.buf.readInt32LE(this.take(4, what));
      case GgufValueType.FLOAT32:
        return this.buf.readFloatLE(this.take(4, what));
      case GgufValueType.BOOL:
        return this.buf.readUInt8(this.take(1, what)) !== 0;
      case GgufValueType.STRING:
        return this.string(what);
      case GgufValueType.UINT64:
        return Number(this.buf.readBigUInt64LE(this.take(8, what)));
      case GgufValueType.INT64:
        return Number(this.buf.readBigInt64LE(this.take(8, what)));
      case GgufValueType.FLOAT64:
        return this.buf.readDoubleLE(this.take(8, what));
      default:
        throw new GgufFormatError(`unknown GGUF value type ${type} for ${what} at byte ${this.pos - 4}`);
    }
  }

  value(type: number, what: string): GgufMetadataValue {
    if (type !== GgufValueType.ARRAY) return this.scalar(type, what);
    const elementType = this.u32(`${what} element type`);
    const length = this.u64(`${what} length`);
    if (elementType === GgufValueType.ARRAY) throw new GgufFormatError(`nested arrays are not supported (${what})`);
    const width = GGUF_SCALAR_BYTES[elementType];
    if (elementType === GgufValueType.STRING) {
      for (let i = 0; i < length; i++) this.skip(this.u64(`${what}[${i}] length`), `${what}[${i}]`);
      return { kind: 'array', elementType, length };
    }
    if (width === undefined) throw new GgufFormatError(`unknown GGUF array element type ${elementType} for ${what}`);
    if (length > MAX_KEPT_ARRAY || elementType === GgufValueType.BOOL) {
      this.skip(width * length, what);
      return { kind: 'array', elementType, length };
    }
    const values: number[] = [];
    for (let i = 0; i < length; i++) values.push(Number(this.scalar(elementType, what)));
    return values;
  }
}

function numberOf(v: GgufMetadataValue | undefined): number | undefined {
  if (typeof v === 'number') return v;
  // Per-layer arrays (e.g. OpenELM): the largest layer is what memory must fit.
  if (Array.isArray(v)) return v.length > 0 ? Math.max(...(v as number[])) : undefined;
  return undefined;
}

function parse(buf: Buffer, fileSize: number): GgufHeader {
  const c = new Cursor(buf, fileSize);
  const magic = c.u32('magic');
  if (magic !== GGUF_MAGIC) {
    const shown = buf
      .subarray(0, 4)
      .toString('latin1')
      .replace(/[^\x20-\x7e]/g, '?');
    throw new GgufFormatError(`not a GGUF file: it starts with "${shown}", not "GGUF"`);
  }
  const version = c.u32('version');
  if (version !== 2 && version !== 3) {
    throw new GgufFormatError(`unsupported GGUF version ${version} (this reader knows versions 2 and 3)`);
  }
  const tensorCount = c.u64('tensor count');
  const kvCount = c.u64('metadata count');
  if (tensorCount > MAX_TENSORS || kvCount > MAX_KVS) {
    throw new GgufFormatError(`implausible GGUF header: ${tensorCount} tensors, ${kvCount} metadata entries`);
  }

  const metadata: Record<string, GgufMetadataValue> = {};
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key #${i}`);
    const type = c.u32(`type of ${key}`);
    metadata[key] = c.value(type, key);
  }

  let parameterCount = 0;
  let dataEnd = 0;
  const tensors: Array<{ name: string; elements: number; type: number; offset: number }> = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor #${i} name`);
    const nDims = c.u32(`${name} dimension count`);
    if (nDims > MAX_DIMS) throw new GgufFormatError(`tensor ${name} has ${nDims} dimensions`);
    let elements = 1;
    for (let d = 0; d < nDims; d++) elements *= c.u64(`${name} dimension ${d}`);
    const type = c.u32(`${name} type`);
    const offset = c.u64(`${name} offset`);
    tensors.push({ name, elements, type, offset });
    parameterCount += elements;
  }

  const alignmentValue = numberOf(metadata['general.alignment']);
  const alignment = alignmentValue !== undefined && alignmentValue > 0 ? alignmentValue : GGUF_DEFAULT_ALIGNMENT;
  const dataOffset = alignUp(c.pos, alignment);
  for (const t of tensors) {
    const block = GGML_TYPE_BLOCKS[t.type];
    if (block === undefined) continue;
    dataEnd = Math.max(dataEnd, dataOffset + t.offset + Math.ceil(t.elements / block[0]) * block[1]);
  }
  // A half-downloaded model has an intact header; only its size gives it away.
  if (dataEnd > fileSize) {
    throw new GgufFormatError(`truncated GGUF: the tensors need ${dataEnd} bytes but the file has ${fileSize}`);
  }

  const architecture = metadata['general.architecture'];
  if (typeof architecture !== 'string' || architecture === '') {
    throw new GgufFormatError('GGUF has no general.architecture');
  }
  const arch = (key: string): number | undefined => numberOf(metadata[`${architecture}.${key}`]);
  const headCount = arch('attention.head_count');
  const embeddingLength = arch('embedding_length');
  const derivedHeadDim = headCount && embeddingLength ? embeddingLength / headCount : undefined;
  const name = metadata['general.name'];
  return {
    version,
    architecture,
    ...(typeof name === 'string' ? { name } : {}),
    parameterCount,
    tensorCount,
    contextLength: arch('context_length'),
    blockCount: arch('block_count'),
    headCount,
    headCountKv: arch('attention.head_count_kv') ?? headCount,
    embeddingLength,
    keyLength: arch('attention.key_length') ?? derivedHeadDim,
    valueLength: arch('attention.value_length') ?? derivedHeadDim,
    fileSizeBytes: fileSize,
    dataOffset,
    metadata,
  };
}

/** First read of a file; enough for most headers, which end long before the weights. */
const FIRST_READ_BYTES = 1 << 20;

/**
 * Reads a GGUF header from a buffer holding the whole file, or from a file path. A file
 * is read only as far as its header goes (a few MB for big vocabularies), never the
 * weights. Throws {@link GgufFormatError} for a non-GGUF or truncated file and the usual
 * fs errors (ENOENT, EACCES) for a path that cannot be read.
 */
export async function readGgufHeader(source: Buffer | string): Promise<GgufHeader> {
  if (typeof source !== 'string') return readGgufHeaderSync(source);
  const fh = await open(source, 'r');
  try {
    const { size } = await fh.stat();
    return await readGgufHeaderAt(size, async (want) => {
      const buf = Buffer.alloc(want);
      const { bytesRead } = await fh.read(buf, 0, want, 0);
      if (bytesRead < want) throw new GgufFormatError(`${source} shrank while being read (a copy still in progress?)`);
      return buf;
    });
  } finally {
    await fh.close();
  }
}

/**
 * Reads a GGUF header from a file of `size` bytes that is read through `read(n)`, which
 * gives its first `n` bytes (n <= size): from a disk, or with an HTTP Range request from
 * a file server. Asks for 1 MiB first and for more only while the header goes on, so a
 * big file is never read past its header.
 */
export async function readGgufHeaderAt(size: number, read: (bytes: number) => Promise<Buffer>): Promise<GgufHeader> {
  let want = Math.min(size, FIRST_READ_BYTES);
  for (;;) {
    const buf = await read(want);
    // A short read would ask for the same bytes again forever.
    if (buf.length < want) throw new GgufFormatError(`only ${buf.length} of the first ${want} bytes could be read`);
    try {
      return parse(buf, size);
    } catch (e) {
      if (!(e instanceof NeedMoreBytes)) throw e;
      want = Math.min(size, Math.max(want * 4, e.needed));
    }
  }
}

/** {@link readGgufHeader} for bytes already in memory: the buffer is the whole file. */
export function readGgufHeaderSync(buffer: Buffer): GgufHeader {
  try {
    return parse(buffer, buffer.length);
  } catch (e) {
    // Cannot happen when the buffer is the whole file, but never leak the internal signal.
    if (e instanceof NeedMoreBytes) throw new GgufFormatError(`truncated GGUF: needs ${e.needed} bytes`);
    throw e;
  }
}
