import { createHash } from 'node:crypto';

export const EMBEDDING_DIM = 8;
const REPLY_PREFIX = 'echo:';

export type FinishReason = 'stop' | 'length';

export interface GenerationPlan {
  /** Token texts in emission order; joining them gives the full reply. */
  tokens: string[];
  finishReason: FinishReason;
}

export interface PlanRequest {
  maxTokens: number;
  /** vLLM's min_tokens: keep cycling the echo until at least this many tokens. */
  minTokens?: number;
  /** vLLM's ignore_eos: never stop on our own, always run to maxTokens. */
  ignoreEos?: boolean;
  /** The reply's first token instead of `echo:` (a LoRA adapter's `echo(NAME):`). */
  prefix?: string;
}

export function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w !== '');
}

export function countWords(text: string): number {
  return words(text).length;
}

/**
 * The natural reply is "echo:" plus the prompt's words, once. Callers that need long
 * outputs (streaming and throughput tests) ask for them with min_tokens or ignore_eos,
 * which cycle the same words, so a reply is a pure function of the request.
 */
export function planGeneration(promptText: string, req: PlanRequest): GenerationPlan {
  const base = [req.prefix ?? REPLY_PREFIX, ...words(promptText)];
  const target = req.ignoreEos === true ? Number.POSITIVE_INFINITY : Math.max(base.length, req.minTokens ?? 0);
  const count = Math.min(target, req.maxTokens);
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) tokens.push((i === 0 ? '' : ' ') + base[i % base.length]);
  return { tokens, finishReason: target > req.maxTokens ? 'length' : 'stop' };
}

/** A unit vector that depends only on the text, so equal inputs compare as similarity 1. */
export function embed(text: string): number[] {
  const digest = createHash('sha256').update(text, 'utf8').digest();
  const raw: number[] = [];
  for (let i = 0; i < EMBEDDING_DIM; i++) raw.push(digest.readInt32LE(i * 4) / 2 ** 31);
  const norm = Math.sqrt(raw.reduce((sum, v) => sum + v * v, 0));
  // An all-zero digest prefix is astronomically unlikely, but a NaN vector would be worse than a fixed one.
  if (norm === 0) return raw.map((_, i) => (i === 0 ? 1 : 0));
  return raw.map((v) => v / norm);
}
