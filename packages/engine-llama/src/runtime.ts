import { randomInt } from 'node:crypto';
import path from 'node:path';
import type {
  ChatModelFunctions,
  ChatWrapper,
  GbnfJsonSchema,
  Llama,
  LlamaChat,
  LlamaCompletion,
  LlamaContext,
  LlamaContextSequence,
  LlamaEmbeddingContext,
  LlamaGrammar,
  LlamaModel,
  Token,
  TokenBias,
} from 'node-llama-cpp';
import { EngineError } from '@llmgw/engine-http';
import { DEFAULT_CONTEXT_SIZE, DEFAULT_MAX_LORAS } from './options.js';
import { LoraContexts } from './loras.js';
import { SlotPool, QueueAbortedError } from './pool.js';
import { chooseSlot, reusedTokens } from './reuse.js';
import { scoreGeneration, scoreTokens, type TokenLogprob } from './logprobs.js';
import type { ChatMessage, EmbeddingResult, FinishReason, GenerationParams, GenerationResult, ModelRuntime, RuntimeOptions } from './runtime-types.js';
import { toHistory } from './history.js';
import { outputGrammar, tokenBiasOf } from './sampler.js';

export type { ChatMessage, EmbeddingResult, FinishReason, GenerationParams, GenerationResult, ModelRuntime, RuntimeOptions } from './runtime-types.js';

/** The prompt does not fit the context: 400 context_length_exceeded, in OpenAI's words. */
function contextOverflow(promptTokens: number, contextSize: number): EngineError {
  return new EngineError(
    'context_length_exceeded',
    `This model's maximum context length is ${contextSize} tokens. However, your prompt resulted in ${promptTokens} tokens.`,
  );
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
    private readonly loras: LoraContexts<Slot>,
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
    const slotsOf = (ctx: LlamaContext, n: number): Slot[] =>
      Array.from({ length: n }, () => {
        const sequence = ctx.getSequence();
        return { sequence, chat: new LlamaChat({ contextSequence: sequence }), completion: new LlamaCompletion({ contextSequence: sequence }) };
      });
    const slots = slotsOf(context, options.parallel);
    const [first] = slots;
    if (first === undefined) throw new Error('--parallel must be at least 1');
    // One sequence per adapter: each loaded adapter's KV cache costs one context's worth, not --parallel's.
    const loras = new LoraContexts<Slot>(
      options.adapters ?? [],
      options.maxLoras ?? DEFAULT_MAX_LORAS,
      async (adapter) => {
        const ctx = await model.createContext({ contextSize, sequences: 1, threads: options.threads, lora: { adapters: [{ filePath: adapter.path }] } });
        return { slots: slotsOf(ctx, 1), dispose: () => ctx.dispose().then(() => freeLoraWeights(model, adapter.path)) };
      },
      (line) => options.log(line),
    );
    return new LlamaRuntime(llama, model, first.chat.chatWrapper, slots, embeddingContext, context.contextSize, loras, async () => {
      await loras.close();
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
    return { processing: this.processing, queued: this.pool.queued + this.loras.queued() };
  }

  adapters(): { served: string[]; loaded: string[]; loads: number; unloads: number } {
    return { served: this.loras.names(), loaded: this.loras.loadedNames(), ...this.loras.counts };
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

  /** Generates on the base model's slots, or on the adapter's (loaded first when it is not). */
  private async generate(params: GenerationParams, prompt: readonly Token[], run: Run): Promise<GenerationResult> {
    if (params.adapter === undefined) return this.generateOn(this.pool, params, prompt, run);
    const lease = await this.loras.lease(params.adapter);
    try {
      return await this.generateOn(lease.pool, params, prompt, run);
    } finally {
      lease.release();
    }
  }

  private async generateOn(pool: SlotPool<Slot>, params: GenerationParams, prompt: readonly Token[], run: Run): Promise<GenerationResult> {
    const promptTokens = prompt.length;
    const maxTokens = Math.min(params.maxTokens ?? Number.POSITIVE_INFINITY, this.room(promptTokens));
    const grammar = await outputGrammar(this.llama, params.grammar);
    const tokenBias = await tokenBiasOf(this.model, params.sampling);
    const commonPrefix = (slot: Slot): number => slot.sequence.compareContextTokens(prompt as Token[]).firstDifferentIndex;
    let slot: Slot;
    try {
      slot = await pool.acquire(params.signal, (free) => chooseSlot(free.map(commonPrefix), promptTokens));
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
      pool.release(slot);
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

/** Runs a chat or a completion on a slot. */
type Run = (
  slot: Slot,
  opts: SharedGenerationOptions,
) => Promise<{ response: string; metadata: { stopReason: string }; functionCalls?: readonly { functionName: string; params: unknown }[] }>;

/**
 * Frees an adapter's weights once its context is gone. node-llama-cpp keeps every LoRA
 * it loaded, by resolved path, until the model is disposed (its `_loraAdapters`, internal
 * in 3.x); an engine that swaps adapters for as long as it runs must free them itself, or
 * each adapter ever used stays in memory. Without that map (another version) it does nothing.
 */
function freeLoraWeights(model: LlamaModel, file: string): void {
  const cache = (model as unknown as { _loraAdapters?: unknown })._loraAdapters;
  if (!(cache instanceof Map)) return;
  const key = path.resolve(process.cwd(), file);
  const lora = cache.get(key) as { dispose?: () => Promise<void> } | undefined;
  if (typeof lora?.dispose !== 'function') return;
  cache.delete(key);
  void lora.dispose().catch(() => undefined);
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
