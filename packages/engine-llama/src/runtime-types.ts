import type { Sampling, OutputGrammar, Tool } from './features.js';
import type { TokenLogprob } from './logprobs.js';
import type { LoraAdapter } from './options.js';

/** The runtime's words: what the HTTP side hands it and gets back (`runtime.ts` implements them). */
/** A chat message after validation; `developer` is folded into `system`. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** An assistant turn's tool calls (arguments as the JSON text the client sent back). */
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** A tool message: the call it answers. */
  toolCallId?: string;
}

/** Sampling and stopping, already validated and defaulted by the HTTP layer. */
export interface GenerationParams {
  /** Requested cap; the backend lowers it to what the context has room for. */
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  /** undefined = a fresh random seed per request. */
  seed: number | undefined;
  stop: readonly string[];
  /** top_k, min_p, penalties and logit_bias (`features.ts`). */
  sampling: Sampling;
  /** The output's grammar (response_format, a forced tool call). */
  grammar?: OutputGrammar;
  /** Chat: functions the model may call (node-llama-cpp's function calling). */
  functions?: readonly Tool[];
  /** `parallel_tool_calls: false`: at most one call per turn. */
  parallelToolCalls?: boolean;
  /** Alternatives per token when logprobs are asked for; undefined for none. */
  logprobs?: number;
  /** Completions: the prompt's logprobs too (`echo`); `maxTokens: 0` then generates nothing. */
  echo?: boolean;
  /** With `echo`: the first prompt token that is the client's (1 when the engine put a BOS token first). */
  echoFrom?: number;
  /** Fires when the client leaves; generation (or the wait for a slot) stops at once. */
  signal: AbortSignal;
  /** Streaming: called with each piece of text as it is generated. */
  onText?: (text: string) => void;
  /** The LoRA adapter (a `--lora` NAME) to generate with; undefined for the base model. */
  adapter?: string;
}

export type FinishReason = 'stop' | 'length' | 'cancelled';

export interface GenerationResult {
  text: string;
  promptTokens: number;
  /** Prompt tokens found in the slot's KV cache and not evaluated again. */
  cachedTokens: number;
  completionTokens: number;
  finishReason: FinishReason;
  /** Calls node-llama-cpp's function calling made (`functions`), arguments parsed. */
  functionCalls?: { name: string; params: unknown }[];
  /** The generated tokens' logprobs, when asked for. */
  logprobs?: TokenLogprob[];
  /** The prompt tokens' logprobs (`echo` with logprobs), the first one null. */
  promptLogprobs?: TokenLogprob[];
}

export interface EmbeddingResult {
  /** L2-normalised, one per input. */
  vectors: number[][];
  promptTokens: number;
}

/** What the engine's HTTP side needs from a loaded model; tests can supply a fake. */
export interface ModelRuntime {
  /** Tokens of context per request. */
  readonly contextSize: number;
  /** Tokens the slots' KV caches hold together (slots × context size): the prefix cache's capacity. */
  readonly prefixCacheTokens: number;
  /** Length of an embedding vector; null when the model cannot embed. */
  readonly embeddingLength: number | null;
  /** Text of token ids (an echoed token prompt). */
  detokenize(tokens: readonly number[]): string;
  chat(messages: readonly ChatMessage[], params: GenerationParams): Promise<GenerationResult>;
  complete(prompt: string | readonly number[], params: GenerationParams): Promise<GenerationResult>;
  embed(inputs: ReadonlyArray<string | readonly number[]>): Promise<EmbeddingResult>;
  /** Requests generating now and waiting for a slot. */
  activity(): { processing: number; queued: number };
  /** The LoRA adapters served (by name), those loaded now (least recently used first), and loads and unloads since start. */
  adapters(): { served: string[]; loaded: string[]; loads: number; unloads: number };
  close(): Promise<void>;
}

export interface RuntimeOptions {
  modelPath: string;
  threads: number;
  parallel: number;
  /** null: `DEFAULT_CONTEXT_SIZE` or the model's trained context, whichever is smaller. */
  contextSize: number | null;
  /** LoRA adapters served by name, each loaded in its own context on first use. */
  adapters?: readonly LoraAdapter[];
  /** Adapters loaded at once (default `DEFAULT_MAX_LORAS`). */
  maxLoras?: number;
  /** llama.cpp's warnings and errors, one line each. */
  log(line: string): void;
}
