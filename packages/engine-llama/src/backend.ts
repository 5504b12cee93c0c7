import { randomBytes } from 'node:crypto';
import { EngineError, openai, params } from '@llmgw/engine-http';
import type { EngineRequest, InferenceBackend, JsonObject } from '@llmgw/engine-http';
import { chatMessages } from './params.js';
import * as features from './features.js';
import { chatLogprobs, completionLogprobs } from './logprobs.js';
import type { FinishReason, GenerationParams, GenerationResult, ModelRuntime } from './runtime.js';

/** Sampler defaults when a request sets none: llama-server's, so a GGUF behaves as it does there. */
const DEFAULT_TEMPERATURE = 0.8;
const DEFAULT_TOP_P = 0.95;
const PROGRAM = 'node-llama-cpp-engine';

/** Totals since the engine started, for /metrics. */
export interface EngineCounters {
  promptTokens: number;
  predictedTokens: number;
  cancelled: number;
}

export interface LlamaBackendOptions {
  servedName: string;
  /** Highest valid token id + 1, to refuse token-id prompts llama.cpp would crash on. */
  vocabSize: number | null;
  log(line: string): void;
}

function newId(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}

/** OpenAI `tool_calls` from a forced call's JSON (`{name, arguments}`) or node-llama-cpp's function calls; undefined for none. */
function toolCalls(result: GenerationResult, forced: boolean): JsonObject[] | undefined {
  let calls: { name: string; params: unknown }[] = result.functionCalls ?? [];
  if (forced) {
    let parsed: { name?: unknown; arguments?: unknown } | undefined;
    try {
      parsed = JSON.parse(result.text) as { name?: unknown; arguments?: unknown };
    } catch {
      // Cut off by max_tokens before the JSON closed: no call, the text as content.
      return undefined;
    }
    if (typeof parsed?.name !== 'string') return undefined;
    calls = [{ name: parsed.name, params: parsed.arguments ?? {} }];
  }
  if (calls.length === 0) return undefined;
  return calls.map((c) => ({ id: newId('call'), type: 'function', function: { name: c.name, arguments: JSON.stringify(c.params ?? {}) } }));
}

function openAIFinish(reason: FinishReason): 'stop' | 'length' {
  return reason === 'length' ? 'length' : 'stop';
}

/**
 * OpenAI's three inference endpoints over a loaded {@link ModelRuntime}: validation of
 * what llama.cpp can honour (sampling, stop, token ids), streaming from the runtime's
 * text callback, and the counters /metrics reports.
 */
export class LlamaBackend implements InferenceBackend {
  private readonly created = Math.floor(Date.now() / 1000);
  /** The `--lora` names: a request naming one is served with that adapter. */
  private readonly adapterNames: ReadonlySet<string>;

  constructor(
    private readonly runtime: ModelRuntime,
    private readonly options: LlamaBackendOptions,
    private readonly counters: EngineCounters,
  ) {
    this.adapterNames = new Set(runtime.adapters().served);
  }

  /** The LoRA adapter the body's `model` names; undefined for the base model (checked: any other name is a 404). */
  private adapterOf(body: JsonObject): string | undefined {
    if (typeof body.model === 'string' && this.adapterNames.has(body.model)) return body.model;
    params.checkModel(body, this.options.servedName, false);
    return undefined;
  }

  /** The slots' KV caches together, for the gateway's prefix index (x-llmgw-prefix-cache-tokens). */
  get prefixCacheTokens(): number {
    return this.runtime.prefixCacheTokens;
  }

  model(): JsonObject {
    return { id: this.options.servedName, object: 'model', created: this.created, owned_by: 'llmgw', max_model_len: this.runtime.contextSize };
  }

  private checkTokens(prompts: ReadonlyArray<string | number[]>, param: string): void {
    const vocab = this.options.vocabSize;
    if (vocab === null) return;
    for (const p of prompts) {
      if (typeof p !== 'string' && p.some((t) => t >= vocab)) {
        throw new EngineError('invalid_value', `${param} has a token id outside the vocabulary (0..${vocab - 1})`, { param });
      }
    }
  }

  private generationParams(r: EngineRequest, body: JsonObject): Omit<GenerationParams, 'onText'> {
    const sampling = features.sampling(body);
    const vocab = this.options.vocabSize;
    if (vocab !== null && sampling.logitBias && [...sampling.logitBias.keys()].some((t) => t >= vocab)) {
      throw new EngineError('invalid_value', `logit_bias has a token id outside the vocabulary (0..${vocab - 1})`, { param: 'logit_bias' });
    }
    return {
      sampling,
      maxTokens: params.maxTokens(body),
      temperature: params.optionalNumber(body, 'temperature', 0, 2) ?? DEFAULT_TEMPERATURE,
      topP: params.optionalNumber(body, 'top_p', 0, 1) ?? DEFAULT_TOP_P,
      seed: params.seed(body),
      stop: params.stopSequences(body),
      signal: r.signal,
    };
  }

  /** A reply's common fields; `model` names the adapter that served it, when one did. */
  private base(prefix: string, adapter: string | undefined): openai.ResponseBase {
    return { id: newId(prefix), created: Math.floor(Date.now() / 1000), model: adapter ?? this.options.servedName, system_fingerprint: null };
  }

  private cancelled(r: EngineRequest, id: string, tokens: number): void {
    this.counters.cancelled++;
    const stoppedMs = r.abortedAt === null ? 0 : performance.now() - r.abortedAt;
    r.note = `${id}, cancelled after ${tokens} tokens`;
    this.options.log(`cancelled ${id} after ${tokens} tokens: client disconnected (generation stopped ${stoppedMs.toFixed(1)} ms later)`);
  }

  private account(result: GenerationResult): void {
    this.counters.promptTokens += result.promptTokens;
    this.counters.predictedTokens += result.completionTokens;
  }

  async chatCompletions(r: EngineRequest, body: JsonObject): Promise<void> {
    const adapter = this.adapterOf(body);
    const messages = chatMessages(body);
    params.rejectMultipleChoices(body);
    const { stream, wantUsage } = params.streamMode(body);
    const tools = features.toolUse(body);
    const format = features.outputGrammar(body);
    if (tools && format)
      throw new EngineError('unsupported_parameter', `response_format with tools is not supported by ${PROGRAM}`, { param: 'response_format' });
    const logprobs = features.chatLogprobs(body);
    // Logprobs are computed once the text is whole (logprobs.ts), after a stream's chunks have gone.
    if (logprobs !== undefined && stream)
      throw new EngineError('unsupported_parameter', `logprobs with stream is not supported by ${PROGRAM}`, { param: 'logprobs' });
    const forced = tools?.mode === 'forced';
    const generation: Omit<GenerationParams, 'onText'> = {
      ...this.generationParams(r, body),
      ...(forced ? { grammar: features.forcedCallGrammar(tools.tools) } : format ? { grammar: format } : {}),
      ...(tools?.mode === 'auto' ? { functions: tools.tools, parallelToolCalls: params.optionalBoolean(body, 'parallel_tool_calls') !== false } : {}),
      ...(logprobs !== undefined ? { logprobs } : {}),
      ...(adapter !== undefined ? { adapter } : {}),
    };
    const base = this.base('chatcmpl', adapter);

    if (!stream) {
      const result = await this.runtime.chat(messages, generation);
      this.account(result);
      if (result.finishReason === 'cancelled') return this.cancelled(r, base.id, result.completionTokens);
      r.note = `${base.id}, ${result.promptTokens}+${result.completionTokens} tokens (${result.cachedTokens} cached), ${result.finishReason}`;
      const calls = toolCalls(result, forced);
      const reply = openai.chatCompletion(
        base,
        calls ? '' : result.text,
        calls ? 'tool_calls' : openAIFinish(result.finishReason),
        openai.usage(result.promptTokens, result.completionTokens, result.cachedTokens),
      );
      const choice = (reply.choices as JsonObject[])[0]!;
      if (calls) choice.message = { role: 'assistant', content: null, tool_calls: calls, refusal: null };
      if (result.logprobs) choice.logprobs = chatLogprobs(result.logprobs) as JsonObject;
      return r.json(200, reply);
    }

    // Headers wait for the first text, so a prompt too long for the context is still a plain 400.
    const events = r.sse();
    let first = true;
    const result = await this.runtime.chat(messages, {
      ...generation,
      onText: (text) => {
        if (first) events.send(openai.chatChunk(base, openai.ROLE_DELTA, null, wantUsage));
        first = false;
        // A forced call's JSON is not content: it goes out as tool_calls at the end.
        if (text !== '' && !forced) events.send(openai.chatChunk(base, { content: text }, null, wantUsage));
      },
    });
    this.account(result);
    if (result.finishReason === 'cancelled') return this.cancelled(r, base.id, result.completionTokens);
    if (first) events.send(openai.chatChunk(base, openai.ROLE_DELTA, null, wantUsage));
    const calls = toolCalls(result, forced);
    if (calls) events.send(openai.chatChunk(base, { tool_calls: calls.map((c, index) => ({ index, ...c })) }, null, wantUsage));
    events.send(openai.chatChunk(base, {}, calls ? 'tool_calls' : openAIFinish(result.finishReason), wantUsage));
    if (wantUsage)
      events.send(openai.usageChunk(base, 'chat.completion.chunk', openai.usage(result.promptTokens, result.completionTokens, result.cachedTokens)));
    r.note = `${base.id}, stream, ${result.promptTokens}+${result.completionTokens} tokens (${result.cachedTokens} cached), ${result.finishReason}`;
    events.end();
  }

  async completions(r: EngineRequest, body: JsonObject): Promise<void> {
    const adapter = this.adapterOf(body);
    const prompts = params.textOrTokenList(body.prompt, 'prompt');
    this.checkTokens(prompts, 'prompt');
    params.rejectMultipleChoices(body);
    params.rejectUnsupported(body, PROGRAM, [
      ['suffix', (v) => v !== ''],
      ['best_of', (v) => v !== 1],
    ]);
    const { stream, wantUsage } = params.streamMode(body);
    const echo = params.optionalBoolean(body, 'echo') === true;
    const logprobs = features.completionLogprobs(body);
    if ((logprobs !== undefined || echo) && stream)
      throw new EngineError('unsupported_parameter', `${echo ? 'echo' : 'logprobs'} with stream is not supported by ${PROGRAM}`, {
        param: echo ? 'echo' : 'logprobs',
      });
    // max_tokens 0 (nothing generated) only makes sense for the prompt's logprobs.
    const zero = body.max_tokens === 0 && echo;
    const format = features.outputGrammar(body);
    const generation: Omit<GenerationParams, 'onText'> = {
      ...this.generationParams(r, zero ? { ...body, max_tokens: null } : body),
      ...(zero ? { maxTokens: 0 } : {}),
      ...(format ? { grammar: format } : {}),
      ...(logprobs !== undefined ? { logprobs } : {}),
      ...(echo ? { echo } : {}),
      ...(adapter !== undefined ? { adapter } : {}),
    };
    const base = this.base('cmpl', adapter);
    const events = stream ? r.sse() : null;
    const choices: JsonObject[] = [];
    let total: openai.Usage = openai.usage(0, 0, 0);

    for (const [index, prompt] of prompts.entries()) {
      const result = await this.runtime.complete(prompt, {
        ...generation,
        onText: events === null ? undefined : (text) => text !== '' && events.send(openai.completionChunk(base, index, text, null, wantUsage)),
      });
      this.account(result);
      total = openai.addUsage(total, openai.usage(result.promptTokens, result.completionTokens, result.cachedTokens));
      if (result.finishReason === 'cancelled') return this.cancelled(r, base.id, total.completion_tokens);
      const promptText = echo ? (typeof prompt === 'string' ? prompt : this.runtime.detokenize(prompt)) : '';
      const choice = openai.completionChoice(index, promptText + result.text, openAIFinish(result.finishReason));
      if (logprobs !== undefined) {
        const lps = [...(result.promptLogprobs ?? []), ...(result.logprobs ?? [])];
        choice.logprobs = completionLogprobs(lps) as JsonObject;
      }
      choices.push(choice);
      events?.send(openai.completionChunk(base, index, '', openAIFinish(result.finishReason), wantUsage));
    }
    r.note = `${base.id}, ${stream ? 'stream, ' : ''}${total.prompt_tokens}+${total.completion_tokens} tokens`;
    if (events === null) return r.json(200, openai.textCompletion(base, choices, total));
    if (wantUsage) events.send(openai.usageChunk(base, 'text_completion', total));
    events.end();
  }

  async embeddings(r: EngineRequest, body: JsonObject): Promise<void> {
    // Embeddings come from the base model's own context: an adapter changes generation only.
    if (this.adapterOf(body) !== undefined)
      throw new EngineError('unsupported_model', `embeddings are not served with a LoRA adapter by ${PROGRAM}; ask ${this.options.servedName}`, {
        param: 'model',
      });
    const inputs = params.textOrTokenList(body.input, 'input');
    this.checkTokens(inputs, 'input');
    if (inputs.some((i) => i === '')) throw new EngineError('invalid_value', 'input must not contain empty strings', { param: 'input' });
    const length = this.runtime.embeddingLength;
    if (length === null) throw new EngineError('unsupported_model', 'this model cannot produce embeddings', { param: 'model' });
    const format = params.embeddingFormat(body, length);
    const { vectors, promptTokens } = await this.runtime.embed(inputs);
    this.counters.promptTokens += promptTokens;
    r.note = `${inputs.length} inputs, ${promptTokens} tokens`;
    r.json(200, openai.embeddingList(this.options.servedName, vectors, format, promptTokens));
  }
}
