import type { Metrics } from '../metrics.js';
import type { StoredKey } from '../store/store.js';
import type { KeyRing } from './keys.js';

/** The token counts an engine reports in its `usage` object. */
export interface TokenUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/**
 * Counts each finished request once, per key (for /api/v1/usage) and per model (for
 * the token metrics), from the usage the engine reported.
 */
export class UsageMeter {
  constructor(
    private readonly keys: KeyRing,
    private readonly metrics: Metrics,
  ) {}

  /** A request the engine answered; `usage` absent when it reported none. */
  served(key: StoredKey, model: string, usage: TokenUsage | undefined): void {
    const promptTokens = usage?.prompt_tokens ?? 0;
    const completionTokens = usage?.completion_tokens ?? 0;
    this.keys.recordUsage(key.id, model, { promptTokens, completionTokens });
    if (promptTokens) this.metrics.countTokens(model, 'prompt', promptTokens);
    if (completionTokens) this.metrics.countTokens(model, 'completion', completionTokens);
  }

  /** A request that ended in an error, the engine's or ours. */
  failed(key: StoredKey, model: string): void {
    this.keys.recordUsage(key.id, model, { error: true });
  }
}

/** The `usage` of a JSON reply or event, parsed only when the text mentions it. */
export function findUsage(json: string): TokenUsage | undefined {
  if (!json.includes('"usage"')) return undefined;
  try {
    const u = (JSON.parse(json) as { usage?: TokenUsage | null }).usage;
    return u ?? undefined;
  } catch {
    return undefined;
  }
}
