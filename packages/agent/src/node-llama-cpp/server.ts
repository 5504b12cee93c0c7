import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { errorTypeForStatus, isObject, openAIError, usage } from '../test-engine/openai.js';
import type { JsonObject, Usage } from '../test-engine/openai.js';
import {
  RequestError,
  chatMessages,
  includeUsage,
  maxTokens,
  optionalBoolean,
  optionalNumber,
  optionalPositiveInt,
  readJson,
  rejectMultipleChoices,
  rejectUnsupported,
  seed,
  stopSequences,
  textOrTokenList,
} from './params.js';
import { ContextOverflowError, UnsupportedRequestError } from './runtime.js';
import type { FinishReason, GenerationParams, GenerationResult, InferenceBackend } from './runtime.js';

export interface EngineServerOptions {
  servedName: string;
  apiKey: string | null;
  /** Highest valid token id + 1, to refuse token-id prompts llama.cpp would crash on. */
  vocabSize: number | null;
  /** One line per request and per notable event. */
  log(line: string): void;
}

export interface EngineServer {
  server: Server;
  /** The model is loaded: /health turns 200 and /v1/* start answering. */
  setBackend(backend: InferenceBackend): void;
}

/** Sampler defaults when a request sets none: llama-server's, so a GGUF behaves as it does there. */
const DEFAULT_TEMPERATURE = 0.8;
const DEFAULT_TOP_P = 0.95;
/** A streaming client this far behind is treated as gone rather than buffered for without end. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  abort: AbortController;
  /** performance.now() when the client went away. */
  abortedAt: number | null;
  /** Extra words for the request's log line. */
  note: string;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed || res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message: string, code: string | null, param: string | null = null, type?: string): void {
  sendJson(res, status, openAIError(message, type ?? errorTypeForStatus(status), code, param));
}

function newId(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}

function openAIFinish(reason: FinishReason): 'stop' | 'length' {
  return reason === 'length' ? 'length' : 'stop';
}

/** Keys compared in constant time, so response timing does not leak a prefix. */
function keyMatches(header: string | undefined, key: string): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice('Bearer '.length));
  const want = Buffer.from(key);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** A Prometheus counter/gauge line pair. */
function metric(name: string, type: 'counter' | 'gauge', help: string, value: number): string {
  return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`;
}

/**
 * The engine's HTTP side on node:http: OpenAI's API in front of an {@link InferenceBackend}.
 * It listens before the model is loaded (llama-server's behaviour): /health says 503
 * "Loading model" until {@link EngineServer.setBackend}, so the agent can tell "still
 * loading" from "dead".
 */
export function createEngineServer(options: EngineServerOptions): EngineServer {
  let backend: InferenceBackend | null = null;
  const created = Math.floor(Date.now() / 1000);
  const counters = { promptTokens: 0, predictedTokens: 0, cancelled: 0 };

  function checkModel(body: JsonObject): void {
    const model = body.model;
    // Like llama-server and vLLM, a request without a model gets the one there is.
    if (model === undefined || model === null) return;
    if (typeof model !== 'string') throw new RequestError(400, 'model must be a string', 'model', 'invalid_type');
    if (model !== options.servedName) {
      throw new RequestError(404, `The model \`${model}\` does not exist.`, 'model', 'model_not_found');
    }
  }

  function checkTokens(prompts: ReadonlyArray<string | number[]>, param: string): void {
    const vocab = options.vocabSize;
    if (vocab === null) return;
    for (const p of prompts) {
      if (typeof p !== 'string' && p.some((t) => t >= vocab)) {
        throw new RequestError(400, `${param} has a token id outside the vocabulary (0..${vocab - 1})`, param, 'invalid_value');
      }
    }
  }

  function generationParams(ctx: RequestContext, body: JsonObject): Omit<GenerationParams, 'onText'> {
    return {
      maxTokens: maxTokens(body),
      temperature: optionalNumber(body, 'temperature', 0, 2) ?? DEFAULT_TEMPERATURE,
      topP: optionalNumber(body, 'top_p', 0, 1) ?? DEFAULT_TOP_P,
      seed: seed(body),
      stop: stopSequences(body),
      signal: ctx.abort.signal,
    };
  }

  function cancelled(ctx: RequestContext, id: string, tokens: number): void {
    counters.cancelled++;
    const stoppedMs = ctx.abortedAt === null ? 0 : performance.now() - ctx.abortedAt;
    ctx.note = `${id}, cancelled after ${tokens} tokens`;
    options.log(`cancelled ${id} after ${tokens} tokens: client disconnected (generation stopped ${stoppedMs.toFixed(1)} ms later)`);
  }

  function account(r: GenerationResult): void {
    counters.promptTokens += r.promptTokens;
    counters.predictedTokens += r.completionTokens;
  }

  /**
   * Server-sent events. Headers go out with the first event, so an error found before
   * any text (a prompt too long for the context) can still be a plain 400.
   */
  function sse(ctx: RequestContext): { send(payload: unknown): void; end(): void } {
    const open = (): boolean => {
      if (ctx.abort.signal.aborted || ctx.res.destroyed) return false;
      if (!ctx.res.headersSent) {
        ctx.res.writeHead(200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
        });
      }
      return true;
    };
    return {
      send(payload) {
        if (!open()) return;
        // Tokens come from a synchronous callback, so backpressure cannot pause the
        // generation; a reader that stops reading altogether counts as gone instead.
        ctx.res.write(`data: ${JSON.stringify(payload)}\n\n`);
        if (ctx.res.writableLength > MAX_BUFFERED_BYTES) {
          ctx.note = 'client stopped reading';
          ctx.res.destroy();
        }
      },
      end() {
        if (open()) ctx.res.end('data: [DONE]\n\n');
      },
    };
  }

  async function chatCompletions(ctx: RequestContext, b: InferenceBackend, body: JsonObject): Promise<void> {
    checkModel(body);
    const messages = chatMessages(body);
    rejectMultipleChoices(body);
    rejectUnsupported(body, [
      ['tools', (v) => Array.isArray(v) && v.length > 0],
      ['functions', (v) => Array.isArray(v) && v.length > 0],
      ['logprobs', (v) => v === true],
      ['response_format', (v) => isObject(v) && v.type !== 'text'],
    ]);
    const stream = optionalBoolean(body, 'stream') === true;
    const wantUsage = stream && includeUsage(body);
    const params = generationParams(ctx, body);
    const id = newId('chatcmpl');
    const base = { id, created: Math.floor(Date.now() / 1000), model: options.servedName, system_fingerprint: null };

    if (!stream) {
      const r = await b.chat(messages, params);
      account(r);
      if (r.finishReason === 'cancelled') return cancelled(ctx, id, r.completionTokens);
      ctx.note = `${id}, ${r.promptTokens}+${r.completionTokens} tokens, ${r.finishReason}`;
      sendJson(ctx.res, 200, {
        ...base,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: r.text, refusal: null }, logprobs: null, finish_reason: openAIFinish(r.finishReason) }],
        usage: usage(r.promptTokens, r.completionTokens),
      });
      return;
    }

    const events = sse(ctx);
    // With include_usage OpenAI puts usage: null on every chunk but the last.
    const chunk = (delta: JsonObject, finish: string | null): JsonObject => ({
      ...base,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(wantUsage ? { usage: null } : {}),
    });
    let first = true;
    const r = await b.chat(messages, {
      ...params,
      onText: (text) => {
        if (first) events.send(chunk({ role: 'assistant', content: '' }, null));
        first = false;
        if (text !== '') events.send(chunk({ content: text }, null));
      },
    });
    account(r);
    if (r.finishReason === 'cancelled') return cancelled(ctx, id, r.completionTokens);
    if (first) events.send(chunk({ role: 'assistant', content: '' }, null));
    events.send(chunk({}, openAIFinish(r.finishReason)));
    if (wantUsage) events.send({ ...base, object: 'chat.completion.chunk', choices: [], usage: usage(r.promptTokens, r.completionTokens) });
    ctx.note = `${id}, stream, ${r.promptTokens}+${r.completionTokens} tokens, ${r.finishReason}`;
    events.end();
  }

  async function completions(ctx: RequestContext, b: InferenceBackend, body: JsonObject): Promise<void> {
    checkModel(body);
    const prompts = textOrTokenList(body.prompt, 'prompt');
    checkTokens(prompts, 'prompt');
    rejectMultipleChoices(body);
    rejectUnsupported(body, [
      ['echo', (v) => v === true],
      ['logprobs', (v) => v !== 0 && v !== false],
      ['suffix', (v) => v !== ''],
      ['best_of', (v) => v !== 1],
    ]);
    const stream = optionalBoolean(body, 'stream') === true;
    const wantUsage = stream && includeUsage(body);
    const params = generationParams(ctx, body);
    const id = newId('cmpl');
    const base = { id, object: 'text_completion', created: Math.floor(Date.now() / 1000), model: options.servedName, system_fingerprint: null };
    const events = stream ? sse(ctx) : null;
    const choice = (index: number, text: string, finish: string | null): JsonObject => ({ index, text, logprobs: null, finish_reason: finish });
    const choices: JsonObject[] = [];
    let total: Usage = usage(0, 0);

    for (let index = 0; index < prompts.length; index++) {
      const r = await b.complete(prompts[index], {
        ...params,
        onText: events === null ? undefined : (text) => text !== '' && events.send({ ...base, choices: [choice(index, text, null)], ...(wantUsage ? { usage: null } : {}) }),
      });
      account(r);
      total = usage(total.prompt_tokens + r.promptTokens, total.completion_tokens + r.completionTokens);
      if (r.finishReason === 'cancelled') return cancelled(ctx, id, total.completion_tokens);
      choices.push(choice(index, r.text, openAIFinish(r.finishReason)));
      events?.send({ ...base, choices: [choice(index, '', openAIFinish(r.finishReason))], ...(wantUsage ? { usage: null } : {}) });
    }
    ctx.note = `${id}, ${stream ? 'stream, ' : ''}${total.prompt_tokens}+${total.completion_tokens} tokens`;
    if (events === null) {
      sendJson(ctx.res, 200, { ...base, choices, usage: total });
      return;
    }
    if (wantUsage) events.send({ ...base, choices: [], usage: total });
    events.end();
  }

  async function embeddings(ctx: RequestContext, b: InferenceBackend, body: JsonObject): Promise<void> {
    checkModel(body);
    const inputs = textOrTokenList(body.input, 'input');
    checkTokens(inputs, 'input');
    if (inputs.some((i) => i === '')) throw new RequestError(400, 'input must not contain empty strings', 'input', 'invalid_value');
    const format = body.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') {
      throw new RequestError(400, "encoding_format must be 'float' or 'base64'", 'encoding_format', 'invalid_value');
    }
    if (b.embeddingLength === null) throw new RequestError(400, 'this model cannot produce embeddings', 'model', 'unsupported_model');
    const dimensions = optionalPositiveInt(body, 'dimensions');
    if (dimensions !== undefined && dimensions !== b.embeddingLength) {
      throw new RequestError(400, `this model only produces ${b.embeddingLength} dimensions`, 'dimensions', 'invalid_value');
    }
    const { vectors, promptTokens } = await b.embed(inputs);
    counters.promptTokens += promptTokens;
    ctx.note = `${inputs.length} inputs, ${promptTokens} tokens`;
    sendJson(ctx.res, 200, {
      object: 'list',
      data: vectors.map((v, index) => ({
        object: 'embedding',
        index,
        embedding: format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v,
      })),
      model: options.servedName,
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    });
  }

  function modelObject(b: InferenceBackend): JsonObject {
    return { id: options.servedName, object: 'model', created, owned_by: 'llmgw', max_model_len: b.contextSize };
  }

  function metrics(res: ServerResponse): void {
    const load = backend?.activity() ?? { processing: 0, queued: 0 };
    // llama-server's metric names, so dashboards written for it work unchanged.
    const text =
      metric('llamacpp:prompt_tokens_total', 'counter', 'Prompt tokens processed.', counters.promptTokens) +
      metric('llamacpp:tokens_predicted_total', 'counter', 'Tokens generated.', counters.predictedTokens) +
      metric('llamacpp:requests_processing', 'gauge', 'Requests generating now.', load.processing) +
      metric('llamacpp:requests_deferred', 'gauge', 'Requests waiting for a free sequence.', load.queued) +
      metric('llmgw_engine_requests_cancelled_total', 'counter', 'Generations stopped because the client disconnected.', counters.cancelled);
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(text);
  }

  function methodNotAllowed(res: ServerResponse, allow: string): void {
    res.setHeader('allow', allow);
    sendError(res, 405, 'Method not allowed', 'method_not_allowed');
  }

  async function route(ctx: RequestContext, path: string): Promise<void> {
    const { req, res } = ctx;
    const method = req.method ?? 'GET';

    if (path === '/health') {
      if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
      // llama-server's exact body while loading, since agents are written against it.
      if (backend === null) return sendJson(res, 503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
      return sendJson(res, 200, { status: 'ok' });
    }
    if (path === '/metrics') {
      if (method !== 'GET') return methodNotAllowed(res, 'GET');
      return metrics(res);
    }
    if (!path.startsWith('/v1/')) return sendError(res, 404, `Unknown path ${path}`, 'not_found');
    if (backend === null) return sendError(res, 503, 'Loading model', 'model_loading', null, 'unavailable_error');
    if (options.apiKey !== null && !keyMatches(req.headers.authorization, options.apiKey)) {
      return sendError(res, 401, 'Incorrect API key provided.', 'invalid_api_key', null, 'invalid_request_error');
    }
    const b = backend;

    if (path === '/v1/models') {
      if (method !== 'GET') return methodNotAllowed(res, 'GET');
      return sendJson(res, 200, { object: 'list', data: [modelObject(b)] });
    }
    if (path.startsWith('/v1/models/')) {
      if (method !== 'GET') return methodNotAllowed(res, 'GET');
      const name = decodeURIComponent(path.slice('/v1/models/'.length));
      if (name !== options.servedName) return sendError(res, 404, `The model \`${name}\` does not exist.`, 'model_not_found', 'model');
      return sendJson(res, 200, modelObject(b));
    }
    const handler =
      path === '/v1/chat/completions' ? chatCompletions : path === '/v1/completions' ? completions : path === '/v1/embeddings' ? embeddings : null;
    if (handler === null) return sendError(res, 404, `Unknown path ${path}`, 'not_found');
    if (method !== 'POST') return methodNotAllowed(res, 'POST');
    const body = await readJson(req);
    return handler(ctx, b, body);
  }

  const server = createServer((req, res) => {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0];
    const requestId = req.headers['x-request-id'];
    if (typeof requestId === 'string') res.setHeader('x-request-id', requestId);
    const ctx: RequestContext = { req, res, abort: new AbortController(), abortedAt: null, note: '' };
    res.on('close', () => {
      // 'close' before the response finished means the client went away: stop its work now.
      if (!res.writableFinished) {
        ctx.abortedAt = performance.now();
        ctx.abort.abort(new Error('client disconnected'));
      }
      if (path === '/health' || path === '/metrics') return;
      const ms = (performance.now() - started).toFixed(1);
      const status = res.writableFinished ? String(res.statusCode) : 'aborted';
      // For a cancelled generation the 'cancelled …' line follows once it has really stopped.
      options.log(`${req.method ?? '?'} ${path} ${status} ${ms}ms${ctx.note === '' ? '' : ` (${ctx.note})`}`);
    });

    route(ctx, path).catch((err: unknown) => {
      // A client that leaves mid-body makes the body read throw; there is no one left to answer.
      if (ctx.abort.signal.aborted || req.socket.destroyed) return;
      if (err instanceof RequestError) return sendError(res, err.status, err.message, err.code, err.param);
      if (err instanceof ContextOverflowError) return sendError(res, 400, err.message, 'context_length_exceeded');
      if (err instanceof UnsupportedRequestError) return sendError(res, 400, err.message, 'unsupported_request');
      options.log(`internal error on ${path}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      if (res.headersSent) res.destroy();
      else sendError(res, 500, `internal error in node-llama-cpp-engine: ${err instanceof Error ? err.message : String(err)}`, 'internal_error');
    });
  });

  return {
    server,
    setBackend: (b) => {
      backend = b;
    },
  };
}
