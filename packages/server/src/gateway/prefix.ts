/**
 * A request's prompt as chained block hashes, for cache-aware routing (README.md,
 * "Cache-aware routing"). No tokenizer: the routing text — each chat message's role and
 * text in order, or a completion's prompt — is written as UTF-8 into one scratch buffer
 * and cut into blocks of {@link BLOCK_BYTES} bytes. One running hash goes over the
 * whole text, and its value at the end of each block names that block *and everything
 * before it* (a chained hash): two prompts share block i's hash only when they share
 * their first i + 1 blocks, so a lookup needs no trie. The last, partial block is hashed
 * too, as llm-d does: a prompt repeated exactly matches whole.
 */

/**
 * 64 bytes of English text are about 16 tokens (OpenAI's rule of thumb: ~4 characters a
 * token), the KV block of vLLM and of the test engine (`--cache-block-tokens 16`): the
 * index sees prefixes at about the engines' own granularity. Smaller costs more hashes
 * and index entries per prompt; larger loses up to a block of every shared prefix.
 */
export const BLOCK_BYTES = 64;
/** Bytes of routing text per token, until a model's engines say otherwise (see {@link BYTES_PER_TOKEN}). */
export const BYTES_PER_TOKEN = 4;
/**
 * The most blocks hashed of one prompt: 8,192 × 64 bytes = 512 KiB, about 131,072
 * tokens (llm-d's `maxPrefixTokensToMatch`). A longer prompt routes on its first
 * 512 KiB, which is where prefixes are shared; the work per request stays bounded.
 */
export const MAX_BLOCKS = 8192;
const MAX_TEXT = MAX_BLOCKS * BLOCK_BYTES;
const WORDS_PER_BLOCK = BLOCK_BYTES / 4;

// One scratch buffer for the routing text and a view of it as 32-bit words: hashing is
// synchronous, so one request at a time uses them, and no request allocates for it.
const memory = new ArrayBuffer(MAX_TEXT);
const scratch = Buffer.from(memory);
const words = new Int32Array(memory);
/** Between messages: a byte no UTF-8 text contains, so `ab`+`c` and `a`+`bc` differ. */
const SEPARATOR = 0xff;

/** A prompt's block hashes, and how many bytes of routing text they cover. */
export interface PromptBlocks {
  /** hashes[i] names blocks 0..i; 31-bit integers, which V8's maps key fastest. */
  hashes: Int32Array;
  bytes: number;
}

/** Any odd start, so that an empty chain is not 0. */
const SEED = 0x2545f491;

const NONE: PromptBlocks = { hashes: new Int32Array(0), bytes: 0 };

/**
 * The block hashes of a request body: `messages` for a chat completion, `prompt` for a
 * completion, `instructions` and `input` for a Responses API request (`responses`); none
 * for anything else (embeddings are not cached by engines), so the policy falls back to
 * the load alone.
 */
export function promptBlocks(body: Record<string, unknown>, responses = false): PromptBlocks {
  let len = 0;
  let known: Remembered | undefined;
  let fresh: Head | undefined;
  const messages = body.messages;
  if (Array.isArray(messages)) {
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i] as unknown;
      if (!m || typeof m !== 'object') continue;
      const { role, content } = m as { role?: unknown; content?: unknown };
      // The first message, when long: a system prompt that most requests repeat.
      const head = i === 0 && typeof role === 'string' && typeof content === 'string' && content.length >= HEAD_MIN_CHARS && content.length <= HEAD_MAX_CHARS;
      if (head && (known = recall(role, content))) {
        // Its whole blocks are hashed already: only the bytes after them are needed.
        known.tail.copy(scratch, known.hashes.length * BLOCK_BYTES);
        len = known.end;
        continue;
      }
      if (typeof role === 'string') len = put(role, len);
      len = sep(len);
      len = putContent(content, len);
      len = sep(len);
      if (head && len < MAX_TEXT) fresh = { role, content, end: len };
      if (len >= MAX_TEXT) break;
    }
  } else if (responses) {
    len = responsesText(body, len);
  } else {
    len = putContent(body.prompt, len);
  }
  return len === 0 ? NONE : hash(len, known, fresh);
}

/** A long first message being hashed for the first time, to remember; `end`: where its text ends. */
interface Head {
  role: string;
  content: string;
  end: number;
}

/**
 * A long first message hashed before: the hashes of the whole blocks its text (role,
 * content, separators) fills, the chain after them, and its bytes after them.
 */
interface Remembered extends Head {
  hashes: Int32Array;
  chain: number;
  tail: Buffer;
}

/**
 * Below 4,096 characters hashing costs about what remembering saves; above 65,536 a
 * remembered message would hold too much text. At most 64, the oldest remembered dropped
 * first: 64 × 64 K characters, at most 8 MiB of strings (two bytes a character), plus
 * 64 × 4 KiB of hashes. Found by length, then compared (a long string's own hash would
 * cost a pass over it). Measured: on the gateway bench's 8,000-token system prompt,
 * `promptBlocks` went from ~22 µs a request to ~3.
 */
const HEAD_MIN_CHARS = 4096;
const HEAD_MAX_CHARS = 65_536;
const HEADS = 64;
const byLength = new Map<number, Remembered[]>();
const remembered: Remembered[] = [];

function recall(role: string, content: string): Remembered | undefined {
  const same = byLength.get(content.length);
  if (same === undefined) return undefined;
  for (const r of same) if (r.role === role && r.content === content) return r;
  return undefined;
}

function remember(r: Remembered): void {
  const same = byLength.get(r.content.length);
  if (same) same.push(r);
  else byLength.set(r.content.length, [r]);
  remembered.push(r);
  if (remembered.length <= HEADS) return;
  const old = remembered.shift()!;
  const bucket = byLength.get(old.content.length)!;
  bucket.splice(bucket.indexOf(old), 1);
  if (bucket.length === 0) byLength.delete(old.content.length);
}

function put(s: string, at: number): number {
  return at >= MAX_TEXT ? at : at + scratch.write(s, at, MAX_TEXT - at, 'utf8');
}

function sep(at: number): number {
  if (at >= MAX_TEXT) return at;
  scratch[at] = SEPARATOR;
  return at + 1;
}

/**
 * A Responses API request's prompt (`instructions`, then `input` as text or items), laid
 * out as the chat messages it becomes: without it a `/v1/responses` request counted no
 * prompt tokens, so it never made a replica saturated nor waited in the fair queue.
 */
function responsesText(body: Record<string, unknown>, at: number): number {
  const turn = (role: string, content: unknown) => sep(putContent(content, sep(put(role, at))));
  if (typeof body.instructions === 'string') at = turn('system', body.instructions);
  if (typeof body.input === 'string') return turn('user', body.input);
  if (!Array.isArray(body.input)) return at;
  for (const item of body.input as unknown[]) {
    if (!item || typeof item !== 'object') continue;
    const { role, content, output, arguments: args } = item as { role?: unknown; content?: unknown; output?: unknown; arguments?: unknown };
    at = turn(typeof role === 'string' ? role : 'tool', content ?? output ?? args);
    if (at >= MAX_TEXT) break;
  }
  return at;
}

/** A message's content: a string, or the text of its parts (`{type: 'text', text}`); a prompt: a string or strings. */
function putContent(c: unknown, at: number): number {
  if (typeof c === 'string') return put(c, at);
  if (!Array.isArray(c)) return at;
  for (const part of c as unknown[]) {
    if (typeof part === 'string') at = put(part, at);
    else if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') at = put((part as { text: string }).text, at);
    at = sep(at);
  }
  return at;
}

/**
 * Jenkins's one-at-a-time mixing: adds, shifts and xors only. No `Math.imul`: V8 does
 * not inline it in every context (in jest's VM contexts, and it was measured ~10×
 * slower in the server too), and this loop is the hot path.
 *
 * One serial hash over 8,000 tokens is a chain of ~40,000 dependent steps, so the loop
 * waits on its own latency; four lanes take every fourth word each and run side by side
 * (measured: the hash of a 32 KB prompt went from ~20 µs to ~6 µs). At each block's end
 * the lanes fold into the chain, which runs on across blocks and is recorded, finalised,
 * there: a block's hash still names it and everything before it.
 */
function hash(len: number, known?: Remembered, fresh?: Head): PromptBlocks {
  // The words past the text, up to the next block's end, are stale: zero them so they
  // do not count (`memory` has room for them: MAX_TEXT is whole blocks).
  const padded = Math.min(Math.ceil(len / BLOCK_BYTES) * BLOCK_BYTES, MAX_TEXT);
  scratch.fill(0, len, padded);
  const nBlocks = padded / BLOCK_BYTES;
  const out = new Int32Array(nBlocks);
  let h = SEED;
  let b = 0;
  if (known) {
    out.set(known.hashes);
    h = known.chain;
    b = known.hashes.length;
  }
  const freshBlocks = fresh ? Math.floor(fresh.end / BLOCK_BYTES) : -1;
  for (; b < nBlocks; b++) {
    let l0 = h;
    let l1 = h ^ 0x5bd1e995;
    let l2 = h ^ 0x1b873593;
    let l3 = h ^ 0x68e31da4;
    for (let w = b * WORDS_PER_BLOCK, e = w + WORDS_PER_BLOCK; w < e; w += 4) {
      l0 = (l0 + words[w]!) | 0;
      l1 = (l1 + words[w + 1]!) | 0;
      l2 = (l2 + words[w + 2]!) | 0;
      l3 = (l3 + words[w + 3]!) | 0;
      l0 = (l0 + (l0 << 10)) | 0;
      l1 = (l1 + (l1 << 10)) | 0;
      l2 = (l2 + (l2 << 10)) | 0;
      l3 = (l3 + (l3 << 10)) | 0;
      l0 ^= l0 >>> 6;
      l1 ^= l1 >>> 6;
      l2 ^= l2 >>> 6;
      l3 ^= l3 >>> 6;
    }
    // Fold the lanes in order, so that words swapped between lanes change the hash.
    h = mix(mix(mix(mix(h, l0), l1), l2), l3);
    out[b] = finish(h, b === nBlocks - 1 ? len : (b + 1) * BLOCK_BYTES);
    if (fresh && b === freshBlocks - 1)
      remember({ ...fresh, hashes: out.slice(0, freshBlocks), chain: h, tail: Buffer.from(scratch.subarray(freshBlocks * BLOCK_BYTES, fresh.end)) });
  }
  return { hashes: out, bytes: len };
}

/** One one-at-a-time step of `v` into `h`. */
function mix(h: number, v: number): number {
  h = (h + v) | 0;
  h = (h + (h << 10)) | 0;
  return h ^ (h >>> 6);
}

/**
 * One-at-a-time's final avalanche, mixed with the length so far (so that trailing zero
 * bytes of a text still count); 31 bits, a small integer to V8.
 */
function finish(h: number, bytes: number): number {
  let f = (h ^ bytes) | 0;
  f = (f + (f << 3)) | 0;
  f ^= f >>> 11;
  f = (f + (f << 15)) | 0;
  return f >>> 1;
}
