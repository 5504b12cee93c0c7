import type { LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';

/** One token's log probability and its most likely alternatives, for OpenAI's `logprobs`. */
export interface TokenLogprob {
  token: string;
  /** null for a prompt's first token, which nothing predicts. */
  logprob: number | null;
  top: { token: string; logprob: number }[];
}

/**
 * The probabilities are taken from the full distribution (temperature 1, no top-k, top-p
 * or min-p truncation), so they are the model's own, whatever the request sampled with:
 * node-llama-cpp reports the softmax over what is left after its sampler chain.
 */
const UNTRUNCATED = { temperature: 1, topK: 0, topP: 1, minP: 0 };

/** log(p), with a floor for a token the distribution gives 0 (OpenAI's -9999 convention). */
const logOf = (p: number | undefined): number => (p !== undefined && p > 0 ? Math.log(p) : -9999);

/**
 * Log probabilities of `tokens` on `seq`, whose context must end just before
 * `tokens[from]`: evaluates `tokens[from - 1 ..]`, asking at each position for the
 * distribution of the next token. Returns one entry per token from `from` on; the
 * sequence afterwards holds every token but the last.
 */
export async function scoreTokens(seq: LlamaContextSequence, model: LlamaModel, tokens: readonly Token[], from: number, top: number): Promise<TokenLogprob[]> {
  // With the tokens before it, so a token's leading space (SentencePiece's ▁) is kept as the text has it.
  const text = (t: Token, at: number) => model.detokenize([t], false, tokens.slice(Math.max(0, at - 8), at));
  if (from >= tokens.length) return [];
  const inputs = tokens.slice(Math.max(0, from - 1), tokens.length - 1);
  const out = await seq.controlledEvaluate(inputs.map((t) => [t, { generateNext: { probabilities: true, options: UNTRUNCATED } }]));
  const result: TokenLogprob[] = [];
  if (from === 0) result.push({ token: text(tokens[0]!, 0), logprob: null, top: [] });
  for (let i = 0; i < out.length; i++) {
    const at = Math.max(0, from - 1) + i + 1;
    const next = tokens[at]!;
    const probs = out[i]?.next?.probabilities;
    const alternatives: { token: string; logprob: number }[] = [];
    if (probs !== undefined) {
      // The map is sorted from most to least likely.
      for (const [t, p] of probs) {
        if (alternatives.length >= top) break;
        alternatives.push({ token: text(t, at), logprob: logOf(p) });
      }
    }
    result.push({ token: text(next, at), logprob: logOf(probs?.get(next)), top: alternatives });
  }
  return result;
}

/**
 * Log probabilities of a generation's `generated` tokens after `prompt`, on the slot that
 * generated them: the generated part of its context is evaluated again, asking for each
 * next token's distribution (a generation of n tokens costs n more evaluations).
 */
export async function scoreGeneration(
  seq: LlamaContextSequence,
  model: LlamaModel,
  prompt: readonly Token[],
  generated: readonly Token[],
  top: number,
): Promise<TokenLogprob[]> {
  if (generated.length === 0 || prompt.length === 0) return [];
  // Keep the prompt but its last token, whose evaluation predicts the first generated one.
  const keep = Math.min(prompt.length - 1, seq.nextTokenIndex);
  await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
  const full = [...prompt.slice(keep), ...generated];
  return scoreTokens(seq, model, full, prompt.length - keep, top);
}

/** Completions' `logprobs` object (tokens, token_logprobs, top_logprobs, text_offset) for tokens of `text` starting at `offset`. */
export function completionLogprobs(lps: readonly TokenLogprob[], offset = 0): Record<string, unknown> {
  const textOffset: number[] = [];
  let at = offset;
  for (const lp of lps) {
    textOffset.push(at);
    at += lp.token.length;
  }
  return {
    tokens: lps.map((l) => l.token),
    token_logprobs: lps.map((l) => l.logprob),
    top_logprobs: lps.map((l) => (l.logprob === null ? null : Object.fromEntries(l.top.map((a) => [a.token, a.logprob])))),
    text_offset: textOffset,
  };
}

/** Chat's `logprobs` object: `content`, one entry per token with its bytes and alternatives. */
export function chatLogprobs(lps: readonly TokenLogprob[]): Record<string, unknown> {
  const bytes = (s: string) => [...Buffer.from(s, 'utf8')];
  return {
    content: lps.map((l) => ({
      token: l.token,
      logprob: l.logprob ?? 0,
      bytes: bytes(l.token),
      top_logprobs: l.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: bytes(a.token) })),
    })),
    refusal: null,
  };
}
