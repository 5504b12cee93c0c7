import type { EmbeddingFormat } from './params.js';
import type { JsonObject } from './json.js';

/**
 * OpenAI's response shapes, written once for both engines. `base` is what every object
 * of one response repeats (`id`, `created`, `model`, and whatever the engine adds, like
 * `system_fingerprint`).
 */
export type ResponseBase = JsonObject & { id: string; created: number; model: string };

/**
 * A completion's `usage`, with OpenAI's `prompt_tokens_details.cached_tokens`: the prompt
 * tokens served from the engine's prefix cache rather than evaluated again (0 when none).
 * The gateway's cache-aware routing reads it to check and correct its prefix index, so
 * both engines send it on every completion, streamed (the usage chunk) or not.
 */
export type Usage = {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
};

export function usage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** Two usages added up (a completion request with several prompts). */
export function addUsage(a: Usage, b: Usage): Usage {
  return usage(
    a.prompt_tokens + b.prompt_tokens,
    a.completion_tokens + b.completion_tokens,
    a.prompt_tokens_details.cached_tokens + b.prompt_tokens_details.cached_tokens,
  );
}

/**
 * Response header on completions from llmgw's own engines: the capacity of the engine's
 * prefix cache, in tokens (0 = none). The gateway sizes its per-replica prefix index from
 * it when present; other engines do not send it and the gateway falls back to a setting.
 */
export const PREFIX_CACHE_TOKENS_HEADER = 'x-llmgw-prefix-cache-tokens';

/** A non-streamed `chat.completion` with its one choice. */
export function chatCompletion(base: ResponseBase, text: string, finishReason: string, total: Usage): JsonObject {
  return {
    ...base,
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: finishReason }],
    usage: total,
  };
}

/** One `chat.completion.chunk`; with include_usage OpenAI puts `usage: null` on every chunk but the last. */
export function chatChunk(base: ResponseBase, delta: JsonObject, finishReason: string | null, wantUsage: boolean): JsonObject {
  return {
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(wantUsage ? { usage: null } : {}),
  };
}

/** The first chunk of a streamed chat: the role, before any text. */
export const ROLE_DELTA: JsonObject = { role: 'assistant', content: '' };

/** A `text_completion` choice. */
export function completionChoice(index: number, text: string, finishReason: string | null): JsonObject {
  return { index, text, logprobs: null, finish_reason: finishReason };
}

/** A non-streamed `text_completion` with all its choices. */
export function textCompletion(base: ResponseBase, choices: JsonObject[], total: Usage): JsonObject {
  return { ...base, object: 'text_completion', choices, usage: total };
}

/** One streamed `text_completion` event, for one choice. */
export function completionChunk(base: ResponseBase, index: number, text: string, finishReason: string | null, wantUsage: boolean): JsonObject {
  return { ...base, object: 'text_completion', choices: [completionChoice(index, text, finishReason)], ...(wantUsage ? { usage: null } : {}) };
}

/** The last event of a stream with include_usage: no choices, the request's usage. */
export function usageChunk(base: ResponseBase, object: 'chat.completion.chunk' | 'text_completion', total: Usage): JsonObject {
  return { ...base, object, choices: [], usage: total };
}

/** OpenAI's base64 encoding: little-endian float32, which the official SDKs request by default. */
export function embeddingToBase64(vector: readonly number[]): string {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
}

/** The `list` of embeddings /v1/embeddings answers, one per input in input order. */
export function embeddingList(model: string, vectors: readonly number[][], format: EmbeddingFormat, promptTokens: number): JsonObject {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: format === 'base64' ? embeddingToBase64(v) : v })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
