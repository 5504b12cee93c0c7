import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { StoredKey } from '../store/store.js';
import type { KeyRing } from './keys.js';

/** The token counts an engine reports in its `usage` object, once checked. */
export interface TokenUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** `prompt_tokens_details.cached_tokens`: prompt tokens the engine served from its prefix cache. */
  cached_tokens?: number;
}

/**
 * What a reply said about usage: nothing, a usage that passed the checks, or one that
 * did not (an engine's numbers are untrusted input: a negative, a string, `1e999`).
 */
export type UsageReport = TokenUsage | 'bad' | undefined;

/** How a request ended, for counting. */
export interface Served {
  /** The usage the engine reported. */
  usage: UsageReport;
  /** Content events relayed to the client, for a stream (see {@link UsageMeter.served}). */
  relayed?: number;
  /** The engine failed mid-stream, after bytes reached the client. */
  failed?: boolean;
  /** The client left mid-stream. */
  cancelled?: boolean;
}

/**
 * Counts each finished request once, per key (for /api/v1/usage) and per model (for
 * the token metrics), from the usage the engine reported. A usage that fails the checks
 * is ignored, counted in `llmgw_engine_bad_usage_total` and logged once per replica.
 */
export class UsageMeter {
  /** Replicas already logged for a bad usage: once each is enough to find the engine. */
  private readonly loggedBad = new Set<string>();

  constructor(
    private readonly keys: KeyRing,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /**
   * A request the engine answered (for a stream: wholly, or up to a failure or the client
   * leaving). The rule for a stream: the engine's usage when it sent a valid one; else
   * (no usage event, a bad one, or a stream cut short before it) one completion token
   * per content event relayed, as the engines here send one token per event, and no
   * prompt tokens, which only the engine knows.
   */
  served(key: StoredKey, model: string, replica: string, s: Served): void {
    if (s.usage === 'bad') this.bad(model, replica);
    const usage = s.usage === 'bad' ? undefined : s.usage;
    const promptTokens = usage?.prompt_tokens ?? 0;
    const completionTokens = usage?.completion_tokens ?? s.relayed ?? 0;
    this.keys.recordUsage(key.id, model, { promptTokens, completionTokens, cancelled: s.cancelled === true, ...(s.failed ? { error: true } : {}) });
    if (promptTokens) this.metrics.countTokens(model, 'prompt', promptTokens);
    if (completionTokens) this.metrics.countTokens(model, 'completion', completionTokens);
    if (s.cancelled) this.metrics.cancelledTokens.inc({ model }, completionTokens);
  }

  /** A request that ended in an error, the engine's or ours. */
  failed(key: StoredKey, model: string): void {
    this.keys.recordUsage(key.id, model, { error: true });
  }

  /** Forgets replicas that are gone, so the once-per-replica log set stays small. */
  prune(ids: ReadonlySet<string>): void {
    for (const id of [...this.loggedBad]) if (!ids.has(id)) this.loggedBad.delete(id);
  }

  private bad(model: string, replica: string): void {
    this.metrics.badUsage.inc({ model });
    if (this.loggedBad.has(replica)) return;
    this.loggedBad.add(replica);
    this.log.warn(
      { model, replica },
      `engine reported a usage that is not whole numbers from 0 to ${MAX_TOKENS_PER_REPLY}; ignored (counted in llmgw_engine_bad_usage_total, logged once per replica)`,
    );
  }
}

/**
 * The most tokens one reply may report in each count (prompt, completion, cached): a
 * thousand times the largest context windows served today. A count above it is not
 * believed (the usage is `bad`), so no run of replies can carry a stored sum anywhere
 * near its limit (`MAX_USAGE_COUNT`, 2^53 − 1: 9 million such replies per key and model).
 */
export const MAX_TOKENS_PER_REPLY = 1_000_000_000;

/** A token count as an engine must send it: a whole number from 0 to {@link MAX_TOKENS_PER_REPLY}. */
const count = (v: unknown): boolean =>
  v === undefined || v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= MAX_TOKENS_PER_REPLY);

/**
 * An engine's `usage` value checked: undefined when absent or null, 'bad' unless it is an
 * object whose token counts are absent or whole numbers >= 0.
 */
export function checkUsage(u: unknown): UsageReport {
  if (u === undefined || u === null) return undefined;
  if (typeof u !== 'object' || Array.isArray(u)) return 'bad';
  const o = u as Record<string, unknown>;
  // The Responses API's words for the same counts (`input_tokens`, ...).
  const p = o.prompt_tokens ?? o.input_tokens;
  const c = o.completion_tokens ?? o.output_tokens;
  const d = o.prompt_tokens_details ?? o.input_tokens_details;
  if (!count(p) || !count(c)) return 'bad';
  let cached: unknown;
  if (d !== undefined && d !== null) {
    if (typeof d !== 'object' || Array.isArray(d)) return 'bad';
    cached = (d as Record<string, unknown>).cached_tokens;
    if (!count(cached)) return 'bad';
  }
  // Built field by field: this runs on every reply, and three spreads cost more than the checks.
  const out: TokenUsage = {};
  if (typeof p === 'number') out.prompt_tokens = p;
  if (typeof c === 'number') out.completion_tokens = c;
  if (typeof cached === 'number') out.cached_tokens = cached;
  return out;
}

/** The `usage` of a JSON reply or event, parsed only when the text mentions it. */
export function findUsage(json: string): UsageReport {
  if (!json.includes('"usage"')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== 'object') return undefined;
  const p = parsed as { usage?: unknown; response?: { usage?: unknown } };
  // A Responses API reply has it at the top; its `response.completed` event, in `response`.
  return checkUsage(p.usage ?? (p.response && typeof p.response === 'object' ? p.response.usage : undefined));
}

/** The most bytes a usage object may take: it is looked for and parsed alone, not with its reply. */
const MAX_USAGE_OBJECT_BYTES = 64 * 1024;

const USAGE_KEY = Buffer.from('"usage"');

/** How much of a reply over {@link SCAN_WHOLE_BYTES} is searched, from its end, for its usage. */
export const USAGE_TAIL_BYTES = 2 * MAX_USAGE_OBJECT_BYTES;

/**
 * Replies up to this size are scanned whole for their top-level `usage` key (a byte scan
 * that tracks depth, no parse); a larger one is searched only in its tail, where
 * OpenAI's replies put `usage`, since a scan of 64 MiB would hold the event loop.
 */
export const SCAN_WHOLE_BYTES = 1024 * 1024;

/**
 * The `usage` of a non-streamed reply, as the chunks it came in (`size` bytes in all).
 * Up to {@link SCAN_WHOLE_BYTES}: the value of the reply's top-level `usage` key, found by
 * a scan that skips strings and nested values (vLLM puts `prompt_logprobs`, which a client
 * can make large, after `usage`; a nested `"usage"` in client-sent metadata is not it).
 * Larger: the last `"usage"` key in the last {@link USAGE_TAIL_BYTES}. Either way only the
 * usage object is parsed: parsing the reply itself was the larger part of counting a
 * small reply's usage on every request (bench/gateway.bench.mjs).
 */
export function usageOfReply(chunks: readonly Buffer[], size: number): UsageReport {
  if (size <= SCAN_WHOLE_BYTES) return topLevelUsage(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  const tail: Buffer[] = [];
  let n = 0;
  for (let i = chunks.length - 1; i >= 0 && n < USAGE_TAIL_BYTES; i--) {
    tail.unshift(chunks[i]!);
    n += chunks[i]!.length;
  }
  return searchUsage(tail.length === 1 ? tail[0]! : Buffer.concat(tail, n));
}

/** The value of the top-level `usage` key of the JSON object in `buf`, checked; undefined when it has none. */
function topLevelUsage(buf: Buffer): UsageReport {
  let depth = 0;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (c === 0x22 /* " */) {
      const start = i;
      for (i++; i < buf.length && buf[i] !== 0x22; i++) if (buf[i] === 0x5c /* \ */) i++;
      // A key of the reply itself: a string at depth 1 followed by `:`.
      if (depth === 1 && i - start === USAGE_KEY.length - 1 && buf.compare(USAGE_KEY, 0, USAGE_KEY.length, start, i + 1) === 0) {
        const at = skipSpace(buf, i + 1);
        if (buf[at] === 0x3a /* : */) return usageValue(buf, skipSpace(buf, at + 1));
      }
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}

/** The usage whose value starts at `i`: an object of at most 64 KiB, parsed alone and checked; `null` is none. */
function usageValue(buf: Buffer, i: number): UsageReport {
  if (buf[i] === 0x6e /* n */) return buf.subarray(i, i + 4).toString() === 'null' ? undefined : 'bad';
  if (buf[i] !== 0x7b /* { */) return 'bad';
  const endAt = objectEnd(buf, i, Math.min(buf.length, i + MAX_USAGE_OBJECT_BYTES));
  if (endAt < 0) return 'bad';
  try {
    return checkUsage(JSON.parse(buf.subarray(i, endAt).toString('utf8')));
  } catch {
    return 'bad';
  }
}

/** {@link usageOfReply} of a reply in one buffer. */
export function findUsageIn(buf: Buffer): UsageReport {
  return usageOfReply([buf], buf.length);
}

/** The usage found from the end of `buf` (see {@link usageOfReply}). */
function searchUsage(buf: Buffer): UsageReport {
  for (let at = buf.lastIndexOf(USAGE_KEY); at >= 0; at = at > 0 ? buf.lastIndexOf(USAGE_KEY, at - 1) : -1) {
    const i = skipSpace(buf, at + USAGE_KEY.length);
    if (buf[i] !== 0x3a /* : */) continue;
    return usageValue(buf, skipSpace(buf, i + 1));
  }
  return undefined;
}

function skipSpace(buf: Buffer, i: number): number {
  while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x0a || buf[i] === 0x0d || buf[i] === 0x09)) i++;
  return i;
}

/** The index just past the JSON object that opens at `start`, or -1 when it does not close before `stop`. */
function objectEnd(buf: Buffer, start: number, stop: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < stop; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}
