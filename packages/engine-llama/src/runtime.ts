import { randomInt } from 'node:crypto';
import type {
  ChatModelFunctions,
  ChatWrapper,
  GbnfJsonSchema,
  Llama,
  LlamaChat,
  LlamaCompletion,
  LlamaContextSequence,
  LlamaEmbeddingContext,
  LlamaGrammar,
  LlamaModel,
  Token,
  TokenBias,
} from 'node-llama-cpp';
import { EngineError } from '@llmgw/engine-http';
import { DEFAULT_CONTEXT_SIZE } from './options.js';
import { SlotPool, QueueAbortedError } from './pool.js';
import { chooseSlot, reusedTokens } from './reuse.js';
import type { OutputGrammar, Sampling, Tool } from './features.js';
import { scoreGeneration, scoreTokens, type TokenLogprob } from './logprobs.js';
import { toHistory } from './history.js';
import { outputGrammar, tokenBiasOf } from './sampler.js';

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

/** The prompt does not fit the context: 400 context_length_exceeded, in OpenAI's words. */
function contextOverflow(promptTokens: number, contextSize: number): EngineError {
  return new EngineError(
    'context_length_exceeded',
    `This model's maximum context length is ${contextSize} tokens. However, your prompt resulted in ${promptTokens} tokens.`,
  );
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
  close(): Promise<void>;
}

export interface RuntimeOptions {
  modelPath: string;
  threads: number;
  parallel: number;
  /** null: {@link DEFAULT_CONTEXT_SIZE} or the model's trained context, whichever is smaller. */
  contextSize: number | null;
  /** llama.cpp's warnings and errors, one line each. */
  log(line: string): void;
}

interface Slot {
  sequence: LlamaContextSequence;
  chat: LlamaChat;
  completion: LlamaCompletion;
}

/**
 * Sampler settings a request does not choose, as llama-server defaults them, so a GGUF
 * behaves here as it does under llama.cpp's own server. Repeat penalty is off as there
 * (and in OpenAI's API, which has none by default).
 */
const TOP_K = 40;
const MIN_P = 0.05;

/** A serialiser: the embedding context has one sequence, so embeddings run one at a time. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

function l2normalise(v: readonly number[]): number[] {
  const norm = Math.hypot(...v);
  return norm > 0 ? v.map((x) => x / norm) : [...v];
}

/**
 * llama.cpp through node-llama-cpp, in this process: one context with `parallel`
 * sequences (each a slot with its own KV cache, batched together by node-llama-cpp),
 * plus one embedding context. A slot keeps its KV cache between requests, and a request
 * takes the free slot whose cache shares the longest prefix with its prompt
 * ({@link chooseSlot}); node-llama-cpp then evaluates only the tokens after that prefix
 * (measured: a repeat of a 961-token chat prompt with a new question evaluated 18, in
 * 27 ms instead of 70), and the result says how many were reused.
 */
export class LlamaRuntime implements ModelRuntime {
  private readonly pool: SlotPool<Slot>;
  readonly prefixCacheTokens: number;
  private readonly embedLock = new Mutex();
  private processing = 0;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly chatWrapper: ChatWrapper,
    slots: Slot[],
    private readonly embeddingContext: LlamaEmbeddingContext | null,
    readonly contextSize: number,
    private readonly dispose: () => Promise<void>,
  ) {
    this.pool = new SlotPool(slots);
    this.prefixCacheTokens = slots.length * contextSize;
  }

  /** Loads the model and creates the contexts; rejects if the file cannot be run. */
  static async load(options: RuntimeOptions): Promise<LlamaRuntime> {
    // Imported here, not at the top, so the HTTP server is up (answering 503) while
    // node-llama-cpp's module graph and native addon load.
    const { getLlama, LlamaChat, LlamaCompletion, LlamaLogLevel } = await import('node-llama-cpp');
    const llama = await getLlama({
      gpu: false,
      // A missing prebuilt binary must be an error, never a compile or a download.
      build: 'never',
      skipDownload: true,
      progressLogs: false,
      maxThreads: options.threads,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (text !== '') options.log(`llama.cpp ${level}: ${text}`);
      },
    });
    const model = await llama.loadModel({ modelPath: options.modelPath });
    const contextSize = options.contextSize ?? Math.min(DEFAULT_CONTEXT_SIZE, model.trainContextSize || DEFAULT_CONTEXT_SIZE);
    const context = await model.createContext({ contextSize, sequences: options.parallel, threads: options.threads });
    let embeddingContext: LlamaEmbeddingContext | null = null;
    try {
      embeddingContext = await model.createEmbeddingContext({ contextSize, threads: options.threads });
    } catch (e) {
      options.log(`embeddings disabled: ${(e as Error).message}`);
    }
    const slots: Slot[] = [];
    for (let i = 0; i < options.parallel; i++) {
      const sequence = context.getSequence();
      slots.push({ sequence, chat: new LlamaChat({ contextSequence: sequence }), completion: new LlamaCompletion({ contextSequence: sequence }) });
    }
    const [first] = slots;
    if (first === undefined) throw new Error('--parallel must be at least 1');
    return new LlamaRuntime(llama, model, first.chat.chatWrapper, slots, embeddingContext, context.contextSize, async () => {
      await embeddingContext?.dispose();
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    });
  }

  get embeddingLength(): number | null {
    return this.embeddingContext === null ? null : this.model.embeddingVectorSize;
  }

  detokenize(tokens: readonly number[]): string {
    return this.model.detokenize(tokens as Token[]);
  }

  activity(): { processing: number; queued: number } {
    return { processing: this.processing, queued: this.pool.queued };
  }

  async close(): Promise<void> {
    await this.dispose();
  }

  /** Tokens left for the answer; the last cell stays free so the context never has to shift. */
  private room(promptTokens: number): number {
    const room = this.contextSize - promptTokens - 1;
    if (room < 1) throw contextOverflow(promptTokens, this.contextSize);
    return room;
  }

  private async generate(
    params: GenerationParams,
    prompt: readonly Token[],
    run: (
      slot: Slot,
      opts: SharedGenerationOptions,
    ) => Promise<{ response: string; metadata: { stopReason: string }; functionCalls?: readonly { functionName: string; params: unknown }[] }>,
  ): Promise<GenerationResult> {
    const promptTokens = prompt.length;
    const maxTokens = Math.min(params.maxTokens ?? Number.POSITIVE_INFINITY, this.room(promptTokens));
    const grammar = await outputGrammar(this.llama, params.grammar);
    const tokenBias = await tokenBiasOf(this.model, params.sampling);
    const commonPrefix = (slot: Slot): number => slot.sequence.compareContextTokens(prompt as Token[]).firstDifferentIndex;
    let slot: Slot;
    try {
      slot = await this.pool.acquire(params.signal, (free) => chooseSlot(free.map(commonPrefix), promptTokens));
    } catch (e) {
      if (e instanceof QueueAbortedError) return { text: '', promptTokens, cachedTokens: 0, completionTokens: 0, finishReason: 'cancelled' };
      throw e;
    }
    // What node-llama-cpp keeps of the slot's cache: it erases from the first token that differs.
    const cachedTokens = reusedTokens(commonPrefix(slot), promptTokens);
    this.processing++;
    let completionTokens = 0;
    const generated: Token[] = [];
    const text: string[] = [];
    try {
      let promptLogprobs: TokenLogprob[] | undefined;
      if (params.echo && params.logprobs !== undefined) {
        // Every prompt token is evaluated again, each asking for the next one's distribution.
        await slot.sequence.eraseContextTokenRanges([{ start: 0, end: slot.sequence.nextTokenIndex }]);
        // A BOS token the engine put first is not the client's: its entries start after it.
        promptLogprobs = await scoreTokens(slot.sequence, this.model, prompt, params.echoFrom ?? 0, params.logprobs);
        // As OpenAI: nothing the client sent predicts its first token.
        if (promptLogprobs[0]) promptLogprobs[0] = { ...promptLogprobs[0], logprob: null, top: [] };
      }
      if (maxTokens === 0)
        return { text: '', promptTokens, cachedTokens, completionTokens: 0, finishReason: 'length', ...(promptLogprobs ? { promptLogprobs } : {}) };
      const result = await run(slot, {
        signal: params.signal,
        stopOnAbortSignal: true,
        maxTokens,
        temperature: params.temperature,
        topP: params.topP,
        topK: params.sampling.topK ?? TOP_K,
        minP: params.sampling.minP ?? MIN_P,
        seed: params.seed ?? randomInt(0, 2 ** 31),
        repeatPenalty: params.sampling.repeat ?? false,
        ...(grammar ? { grammar } : {}),
        ...(tokenBias ? { tokenBias } : {}),
        customStopTriggers: params.stop,
        onToken: (tokens: Token[]) => {
          completionTokens += tokens.length;
          generated.push(...tokens);
        },
        onTextChunk: (chunk: string) => {
          text.push(chunk);
          params.onText?.(chunk);
        },
      });
      const reason = result.metadata.stopReason;
      const finishReason: FinishReason = reason === 'abort' ? 'cancelled' : reason === 'maxTokens' ? 'length' : 'stop';
      // node-llama-cpp can hold the last token back from onToken (an unfinished UTF-8
      // sequence, a possible stop trigger) when maxTokens ends the generation; having
      // stopped for length means exactly maxTokens were generated.
      const count = finishReason === 'length' && maxTokens !== undefined ? Math.max(completionTokens, maxTokens) : completionTokens;
      const out: GenerationResult = { text: result.response, promptTokens, cachedTokens, completionTokens: count, finishReason };
      if (promptLogprobs) out.promptLogprobs = promptLogprobs;
      if (result.functionCalls?.length) out.functionCalls = result.functionCalls.map((c) => ({ name: c.functionName, params: c.params }));
      if (params.logprobs !== undefined && finishReason !== 'cancelled') {
        // Tokens held back from onToken (see above) are recovered from the text.
        const tokens = generated.length ? generated : this.model.tokenize(result.response, false);
        out.logprobs = await scoreGeneration(slot.sequence, this.model, prompt, tokens, params.logprobs);
      }
      return out;
    } catch (e) {
      // Aborted before the first token, node-llama-cpp throws the signal's reason.
      if (params.signal.aborted) return { text: text.join(''), promptTokens, cachedTokens, completionTokens, finishReason: 'cancelled' };
      throw e;
    } finally {
      this.processing--;
      this.pool.release(slot);
    }
  }

  chat(messages: readonly ChatMessage[], params: GenerationParams): Promise<GenerationResult> {
    const history = toHistory(messages);
    const functions: ChatModelFunctions | undefined = params.functions?.length
      ? Object.fromEntries(
          params.functions.map((f) => [
            f.name,
            { ...(f.description ? { description: f.description } : {}), ...(f.parameters ? { params: f.parameters as unknown as GbnfJsonSchema } : {}) },
          ]),
        )
      : undefined;
    const { contextText } = this.chatWrapper.generateContextState({ chatHistory: history, ...(functions ? { availableFunctions: functions } : {}) });
    // The tokens LlamaChat evaluates for this history, so the slot's cache can be compared with them.
    const prompt = contextText.tokenize(this.model.tokenizer);
    return this.generate(params, prompt, (slot, opts) =>
      slot.chat.generateResponse(
        history,
        functions ? { ...opts, grammar: undefined, functions, ...(params.parallelToolCalls === false ? { maxParallelFunctionCalls: 1 } : {}) } : opts,
      ),
    );
  }

  complete(prompt: string | readonly number[], params: GenerationParams): Promise<GenerationResult> {
    const tokens: Token[] = typeof prompt === 'string' ? this.model.tokenize(prompt) : (prompt as Token[]);
    const vocab = this.model.tokens;
    // LlamaCompletion puts the BOS token first when the model wants one and the prompt lacks it.
    const evaluated = vocab.shouldPrependBosToken && vocab.bos !== null && tokens[0] !== vocab.bos ? [vocab.bos, ...tokens] : tokens;
    const echoFrom = evaluated.length - tokens.length;
    return this.generate({ ...params, echoFrom }, evaluated, (slot, opts) =>
      slot.completion.generateCompletionWithMeta(tokens, { ...opts, disableContextShift: true }),
    );
  }

  embed(inputs: ReadonlyArray<string | readonly number[]>): Promise<EmbeddingResult> {
    const ctx = this.embeddingContext;
    if (ctx === null) return Promise.reject(new EngineError('unsupported_request', 'this model cannot produce embeddings'));
    return this.embedLock.run(async () => {
      const vectors: number[][] = [];
      let promptTokens = 0;
      for (const input of inputs) {
        const value = typeof input === 'string' ? input : (input as Token[]);
        const length = ctx.calculateInputLength(value);
        if (length > this.contextSize) throw contextOverflow(length, this.contextSize);
        promptTokens += length;
        const { vector } = await ctx.getEmbeddingFor(value);
        vectors.push(l2normalise(vector));
      }
      return { vectors, promptTokens };
    });
  }
}

/** The options chat and completion generation share (both accept this subset). */
interface SharedGenerationOptions {
  signal: AbortSignal;
  stopOnAbortSignal: boolean;
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  seed: number;
  repeatPenalty: false | { penalty: number; frequencyPenalty: number; presencePenalty: number };
  grammar?: LlamaGrammar;
  tokenBias?: TokenBias;
  customStopTriggers: readonly string[];
  onToken: (tokens: Token[]) => void;
  onTextChunk: (text: string) => void;
}
