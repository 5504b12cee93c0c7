import { setTimeout as sleep } from 'node:timers/promises';
import { EngineError, isObject, openai, params } from '@llmgw/engine-http';
import type { EngineRequest, InferenceBackend, Json, JsonObject } from '@llmgw/engine-http';
import { countWords, embed, planGeneration, words, EMBEDDING_DIM } from './generate.js';
import type { GenerationPlan } from './generate.js';
import type { EngineOptions } from './options.js';
import { PrefillQueue, PrefixCache } from './prefix-cache.js';
import { AdapterSlots } from './adapters.js';
import { BAD_USAGE, GARBAGE_BODY, GARBAGE_EVENTS, USAGE_SENTINEL, withBadUsage } from './faults.js';

export interface EngineHooks {
  /** One line per request and per notable event; the CLI sends these to stdout. */
  log(line: string): void;
  /**
   * Called when an inference request arrives after --crash-after N requests were served.
   * The CLI exits here; if this returns, the request's socket is destroyed so the
   * client still sees a dropped connection rather than an answer.
   */
  onCrash(requestNumber: number): void;
}

/** Text of a chat message's content: a string, or the text parts of a content array (others count as nothing). */
function looseText(content: Json | undefined): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (isObject(part) && typeof part.text === 'string' ? part.text : '')).join(' ');
  }
  return '';
}

/** Prompts and inputs as text: token ids stand in for words. */
function promptTexts(value: Json | undefined, param: string): string[] {
  return params.textOrTokenList(value, param).map((p) => (typeof p === 'string' ? p : p.join(' ')));
}

/**
 * The scripted model: replies are a pure function of the request ("echo:" and the words
 * of the last user message, see {@link planGeneration}), paced by --token-delay-ms, and
 * the failures of --crash-after and --fail-status, for tests of everything around an engine.
 */
export class ScriptedBackend implements InferenceBackend {
  private inferenceRequests = 0;
  private idCounter = 0;
  private readonly cache: PrefixCache;
  private readonly prefills: PrefillQueue;
  readonly prefixCacheTokens: number;
  /** The LoRA adapters' slots (`--lora`, `--max-loras`, `--lora-load-ms`). */
  readonly adapters: AdapterSlots;

  constructor(
    private readonly options: EngineOptions,
    private readonly hooks: EngineHooks,
  ) {
    this.cache = new PrefixCache(options.prefixCacheTokens, options.cacheBlockTokens);
    this.prefills = new PrefillQueue(options.prefillTokensPerS);
    this.prefixCacheTokens = options.prefixCacheTokens;
    this.adapters = new AdapterSlots(options.loras, options.maxLoras, options.loraLoadMs);
  }

  /**
   * The LoRA adapter a completion asks for by its `model`; undefined for the served model
   * itself. Any other name is refused with OpenAI's 404.
   */
  private adapterOf(body: JsonObject): string | undefined {
    const name = body.model;
    if (typeof name === 'string' && name !== this.options.model && this.adapters.adapter(name)) return name;
    params.checkModel(body, this.options.model, true);
    return undefined;
  }

  /** Loads `adapter` when it is not in a slot (the simulated load time), once the request is known to be valid. */
  private async load(r: EngineRequest, adapter: string | undefined): Promise<void> {
    if (adapter === undefined) return;
    const use = await this.adapters.use(adapter, r.signal);
    if (use.loaded) this.hooks.log(`loaded adapter ${adapter}${use.evicted === undefined ? '' : `, evicted ${use.evicted}`}`);
  }

  model(): JsonObject {
    // `created` is fixed rather than Date.now() so /v1/models stays byte-identical across restarts.
    return { id: this.options.model, object: 'model', created: 1_700_000_000, owned_by: 'llmgw-test-engine' };
  }

  admit(r: EngineRequest): boolean {
    // Counted on arrival (after auth) so request N+1 dies before any answer, like an engine crash.
    this.inferenceRequests++;
    if (this.options.crashAfter !== null && this.inferenceRequests > this.options.crashAfter) {
      r.note = 'crash';
      this.hooks.onCrash(this.inferenceRequests);
      r.drop();
      return false;
    }
    const status = this.options.failStatus;
    if (status !== null) {
      r.note = 'injected failure';
      throw new EngineError('injected_failure', `injected failure: HTTP ${status} (--fail-status)`, { status });
    }
    return true;
  }

  private plan(body: JsonObject, prompt: string, adapter: string | undefined): GenerationPlan {
    return planGeneration(prompt, {
      ...(adapter === undefined ? {} : { prefix: `echo(${adapter}):` }),
      maxTokens: params.maxTokens(body) ?? this.options.maxTokensDefault,
      minTokens: params.optionalInt(body, 'min_tokens', 0),
      ignoreEos: params.optionalBoolean(body, 'ignore_eos'),
    });
  }

  /** A reply's id, time and model: the adapter's name when one served it, as vLLM answers. */
  private base(prefix: string, adapter: string | undefined): openai.ResponseBase {
    return { id: `${prefix}-${++this.idCounter}`, created: Math.floor(Date.now() / 1000), model: adapter ?? this.options.model };
  }

  /** Waits out the simulated per-token time; false means the client left meanwhile. */
  private async tokenPause(r: EngineRequest, tokens: number): Promise<boolean> {
    if (r.signal.aborted) return false;
    const ms = this.options.tokenDelayMs * tokens;
    if (ms <= 0) return true;
    try {
      await sleep(ms, undefined, { signal: r.signal });
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The simulated prefill of each prompt (its tokens): cache lookup, the wait for the one
   * prefill at a time, then the blocks cached. Returns the prompts' cached tokens, or null
   * when the client left meanwhile.
   */
  private async prefill(r: EngineRequest, prompts: ReadonlyArray<readonly string[]>): Promise<number | null> {
    let cached = 0;
    for (const tokens of prompts) {
      // No cache: nothing to name, only the prefill time to wait out.
      const names = this.prefixCacheTokens === 0 ? [] : this.cache.blockNames(tokens);
      const start = (): number => {
        const hit = this.cache.lookup(names, tokens.length);
        cached += hit;
        return tokens.length - hit;
      };
      if (!(await this.prefills.run(r.signal, start, () => this.cache.insert(names)))) return null;
    }
    return cached;
  }

  /** `--fault stall`: says nothing more until the client gives up. */
  private async stall(r: EngineRequest): Promise<void> {
    r.note = 'stalled (--fault stall)';
    if (!r.signal.aborted) await new Promise((resolve) => r.signal.addEventListener('abort', resolve, { once: true }));
  }

  private cancelled(r: EngineRequest, id: string, done: number, total: number): void {
    r.note = `cancelled after ${done}/${total} tokens`;
    this.hooks.log(`cancelled ${id} after ${done}/${total} tokens: client disconnected`);
  }

  /** An event stream that waits for the client to take each event (the tokens can pause). */
  private stream(r: EngineRequest): { send(payload: JsonObject): Promise<boolean>; sendRaw(text: string): boolean; end(): void } {
    const events = r.sse();
    events.open();
    return { send: async (payload) => events.send(payload) && (await events.drained()), sendRaw: (text) => events.sendRaw(text), end: () => events.end() };
  }

  async chatCompletions(r: EngineRequest, body: JsonObject): Promise<void> {
    const adapter = this.adapterOf(body);
    // The prompt's tokens for the cache: each message's words, tagged with its role.
    const promptKeys: string[] = [];
    let lastUser = '';
    for (const message of params.messageList(body)) {
      const text = looseText(message.content);
      const role = typeof message.role === 'string' ? message.role : '';
      // An adapter's KV differs from the base's, so its prefixes are its own (vLLM keys blocks on the LoRA too).
      for (const word of words(text)) promptKeys.push(`${adapter === undefined ? '' : `${adapter}\u0002`}${role}\u0001${word}`);
      if (message.role === 'user') lastUser = text;
    }
    const promptTokens = promptKeys.length;
    params.rejectMultipleChoices(body);
    const { stream, wantUsage } = params.streamMode(body);
    await this.load(r, adapter);
    const { tokens, finishReason } = this.plan(body, lastUser, adapter);
    const base = this.base('chatcmpl', adapter);
    const fault = this.options.fault;
    const badUsage = fault !== null && BAD_USAGE[fault] !== undefined;
    if (fault === 'oversized-event') tokens.splice(0, tokens.length, 'x'.repeat(this.options.faultBytes));

    if (!stream) {
      if (fault === 'stall') return this.stall(r);
      const cached = await this.prefill(r, [promptKeys]);
      if (cached === null || !(await this.tokenPause(r, tokens.length))) return this.cancelled(r, base.id, 0, tokens.length);
      const total = openai.usage(promptTokens, tokens.length, cached);
      r.note = `${tokens.length} tokens, ${finishReason}`;
      if (fault === 'garbage') return r.text(200, 'application/json', GARBAGE_BODY);
      const reply = openai.chatCompletion(base, tokens.join(''), finishReason, total);
      if (badUsage) return r.text(200, 'application/json', withBadUsage(JSON.stringify({ ...reply, usage: USAGE_SENTINEL }), fault));
      return r.json(200, reply);
    }

    const events = this.stream(r);
    if (fault === 'stall') return this.stall(r);
    if (fault === 'garbage') for (const g of GARBAGE_EVENTS) events.sendRaw(g);
    const cached = await this.prefill(r, [promptKeys]);
    if (cached === null) return this.cancelled(r, base.id, 0, tokens.length);
    const total = openai.usage(promptTokens, tokens.length, cached);
    if (!(await events.send(openai.chatChunk(base, openai.ROLE_DELTA, null, wantUsage)))) return this.cancelled(r, base.id, 0, tokens.length);
    for (const [i, token] of tokens.entries()) {
      if (!(await this.tokenPause(r, 1)) || !(await events.send(openai.chatChunk(base, { content: token }, null, wantUsage)))) {
        return this.cancelled(r, base.id, i, tokens.length);
      }
    }
    if (!(await events.send(openai.chatChunk(base, {}, finishReason, wantUsage)))) return this.cancelled(r, base.id, tokens.length, tokens.length);
    if (wantUsage && badUsage) {
      events.sendRaw(`data: ${withBadUsage(JSON.stringify({ ...openai.usageChunk(base, 'chat.completion.chunk', total), usage: USAGE_SENTINEL }), fault)}\n\n`);
    } else if (wantUsage && !(await events.send(openai.usageChunk(base, 'chat.completion.chunk', total)))) {
      return this.cancelled(r, base.id, tokens.length, tokens.length);
    }
    r.note = `stream, ${tokens.length} tokens, ${finishReason}`;
    events.end();
  }

  async completions(r: EngineRequest, body: JsonObject): Promise<void> {
    const adapter = this.adapterOf(body);
    const prompts = promptTexts(body.prompt, 'prompt');
    params.rejectMultipleChoices(body);
    const { stream, wantUsage } = params.streamMode(body);
    const plans = prompts.map((p) => this.plan(body, p, adapter));
    const promptTokens = prompts.reduce((sum, p) => sum + countWords(p), 0);
    const completionTokens = plans.reduce((sum, p) => sum + p.tokens.length, 0);
    const base = this.base('cmpl', adapter);
    await this.load(r, adapter);
    const cached = await this.prefill(
      r,
      prompts.map((p) => (adapter === undefined ? words(p) : words(p).map((w) => `${adapter}\u0002${w}`))),
    );
    if (cached === null) return this.cancelled(r, base.id, 0, completionTokens);
    const total = openai.usage(promptTokens, completionTokens, cached);

    if (!stream) {
      if (!(await this.tokenPause(r, completionTokens))) return this.cancelled(r, base.id, 0, completionTokens);
      r.note = `${completionTokens} tokens`;
      return r.json(
        200,
        openai.textCompletion(
          base,
          plans.map((p, index) => openai.completionChoice(index, p.tokens.join(''), p.finishReason)),
          total,
        ),
      );
    }

    const events = this.stream(r);
    let emitted = 0;
    for (const [index, { tokens, finishReason }] of plans.entries()) {
      for (const token of tokens) {
        if (!(await this.tokenPause(r, 1)) || !(await events.send(openai.completionChunk(base, index, token, null, wantUsage)))) {
          return this.cancelled(r, base.id, emitted, completionTokens);
        }
        emitted++;
      }
      if (!(await events.send(openai.completionChunk(base, index, '', finishReason, wantUsage)))) return this.cancelled(r, base.id, emitted, completionTokens);
    }
    if (wantUsage && !(await events.send(openai.usageChunk(base, 'text_completion', total)))) return this.cancelled(r, base.id, emitted, completionTokens);
    r.note = `stream, ${completionTokens} tokens`;
    events.end();
  }

  embeddings(r: EngineRequest, body: JsonObject): Promise<void> {
    params.checkModel(body, this.options.model, true);
    const inputs = promptTexts(body.input, 'input');
    const format = params.embeddingFormat(body, EMBEDDING_DIM);
    const promptTokens = inputs.reduce((sum, text) => sum + countWords(text), 0);
    r.note = `${inputs.length} inputs`;
    r.json(200, openai.embeddingList(this.options.model, inputs.map(embed), format, promptTokens));
    return Promise.resolve();
  }
}
