import type { JsonObject } from './json.js';
import type { EngineRequest } from './request.js';

/**
 * What an engine plugs into the shared HTTP layer: the model it serves and the three
 * inference endpoints. The layer has already routed, checked the engine key and the
 * method, and parsed the body to a JSON object; a handler validates the rest (with
 * `params.ts`), answers through `req`, and throws {@link EngineError} to refuse.
 */
export interface InferenceBackend {
  /** The served model's entry in /v1/models. */
  model(): JsonObject;
  /**
   * Capacity of the engine's prefix cache in tokens, sent as
   * `x-llmgw-prefix-cache-tokens` (`openai.PREFIX_CACHE_TOKENS_HEADER`) on every chat and
   * text completion response; absent, no header.
   */
  readonly prefixCacheTokens?: number;
  /**
   * Called for each inference request before its body is read; false means the backend
   * has dealt with it (the test engine's scripted crash). Throwing refuses it.
   */
  admit?(req: EngineRequest): boolean;
  chatCompletions(req: EngineRequest, body: JsonObject): Promise<void>;
  completions(req: EngineRequest, body: JsonObject): Promise<void>;
  embeddings(req: EngineRequest, body: JsonObject): Promise<void>;
}
