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
      'engine reported a usage that is not whole numbers >= 0; ignored (counted in llmgw_engine_bad_usage_total, logged once per replica)',
    );
  }
}

/** A token count as an engine must send it: a whole number >= 0 that a double holds exactly. */
const count = (v: unknown): boolean => v === undefined || v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);

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
  return {
    ...(typeof p === 'number' ? { prompt_tokens: p } : {}),
    ...(typeof c === 'number' ? { completion_tokens: c } : {}),
    ...(typeof cached === 'number' ? { cached_tokens: cached } : {}),
  };
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
