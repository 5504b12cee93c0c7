import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { countWords, embed, embeddingToBase64, planGeneration, EMBEDDING_DIM } from './generate.js';
import type { GenerationPlan } from './generate.js';
import { errorTypeForStatus, isObject, openAIError, readJson, RequestError, usage } from './openai.js';
import type { Json, JsonObject, OpenAIErrorBody, Usage } from './openai.js';
import type { EngineOptions } from './options.js';

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

export interface EngineServer {
  server: Server;
  /** Ends the simulated model load: /health turns 200 and /v1/* start answering. */
  markLoaded(): void;
  isLoaded(): boolean;
}

const INFERENCE_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings']);


interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** Aborted when the client goes away before the response is complete. */
  signal: AbortSignal;
  /** Extra words for the request's log line. */
  note: string;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, body: OpenAIErrorBody): void {
  sendJson(res, status, body);
}


function optionalPositiveInt(body: JsonObject, name: string): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new RequestError(400, `${name} must be a positive integer`, name, 'invalid_value');
  }
  return value;
}

function optionalBoolean(body: JsonObject, name: string): boolean | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new RequestError(400, `${name} must be a boolean`, name, 'invalid_type');
  return value;
}

function includeUsage(body: JsonObject): boolean {
  const streamOptions = body.stream_options;
  if (streamOptions === undefined || streamOptions === null) return false;
  if (!isObject(streamOptions)) throw new RequestError(400, 'stream_options must be an object', 'stream_options');
  return optionalBoolean(streamOptions, 'include_usage') === true;
}

function rejectMultipleChoices(body: JsonObject): void {
  const n = optionalPositiveInt(body, 'n');
  // Silently returning one choice when several were asked for would hide bugs in callers.
  if (n !== undefined && n !== 1) throw new RequestError(400, 'this test engine only supports n=1', 'n', 'unsupported_value');
}

/** Text of a chat message's content: a string, or the text parts of a content array. */
function contentText(content: Json | undefined): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (isObject(part) && typeof part.text === 'string' ? part.text : ''))
      .join(' ');
  }
  return '';
}

/** Prompts of /v1/completions and inputs of /v1/embeddings: text, or token ids standing in for words. */
function promptList(value: Json | undefined, param: string): string[] {
  const invalid = new RequestError(400, `${param} must be a string, an array of strings, or token ids`, param, 'invalid_type');
  if (typeof value === 'string') return [value];
  if (!Array.isArray(value) || value.length === 0) throw invalid;
  if (value.every((v) => typeof v === 'string')) return value as string[];
  if (value.every((v) => typeof v === 'number')) return [value.join(' ')];
  if (value.every((v) => Array.isArray(v) && v.every((id) => typeof id === 'number'))) {
    return value.map((ids) => (ids as number[]).join(' '));
  }
  throw invalid;
}

export function createEngineServer(options: EngineOptions, hooks: EngineHooks): EngineServer {
  let loaded = false;
  let inferenceRequests = 0;
  let idCounter = 0;

  const modelObject = (): JsonObject => ({
    id: options.model,
    object: 'model',
    // Fixed rather than Date.now() so /v1/models stays byte-identical across restarts.
    created: 1_700_000_000,
    owned_by: 'llmgw-test-engine',
  });

  function checkModel(body: JsonObject): void {
    const model = body.model;
    if (typeof model !== 'string' || model === '') {
      throw new RequestError(400, 'you must provide a model parameter', 'model', 'missing_model');
    }
    if (model !== options.model) {
      throw new RequestError(404, `The model \`${model}\` does not exist.`, 'model', 'model_not_found');
    }
  }

  function maxTokens(body: JsonObject): number {
    // OpenAI treats max_completion_tokens as the successor of max_tokens, so it wins when both are set.
    return optionalPositiveInt(body, 'max_completion_tokens') ?? optionalPositiveInt(body, 'max_tokens') ?? options.maxTokensDefault;
  }

  function plan(body: JsonObject, prompt: string): GenerationPlan {
    const minTokens = body.min_tokens;
    if (minTokens !== undefined && minTokens !== null && (typeof minTokens !== 'number' || !Number.isInteger(minTokens) || minTokens < 0)) {
      throw new RequestError(400, 'min_tokens must be a non-negative integer', 'min_tokens', 'invalid_value');
    }
    return planGeneration(prompt, {
      maxTokens: maxTokens(body),
      minTokens: typeof minTokens === 'number' ? minTokens : undefined,
      ignoreEos: optionalBoolean(body, 'ignore_eos'),
    });
  }

  /** Waits out the simulated per-token time; false means the client left meanwhile. */
  async function tokenPause(ctx: RequestContext, tokens: number): Promise<boolean> {
    if (ctx.signal.aborted) return false;
    const ms = options.tokenDelayMs * tokens;
    if (ms <= 0) return true;
    try {
      await sleep(ms, undefined, { signal: ctx.signal });
      return true;
    } catch {
      return false;
    }
  }

  function cancelled(ctx: RequestContext, id: string, done: number, total: number): void {
    ctx.note = `cancelled after ${done}/${total} tokens`;
    hooks.log(`cancelled ${id} after ${done}/${total} tokens: client disconnected`);
  }

  /** Server-sent events written one chunk per write, so each token reaches the client at once. */
  function startSse(ctx: RequestContext): (payload: string) => Promise<boolean> {
    ctx.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    ctx.res.flushHeaders();
    return async (payload) => {
      if (ctx.signal.aborted || ctx.res.destroyed) return false;
      if (ctx.res.write(`data: ${payload}\n\n`)) return true;
      // Honour backpressure; 'close' also ends the wait so a vanished client can't hang us.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          ctx.res.off('drain', done);
          ctx.res.off('close', done);
          resolve();
        };
        ctx.res.once('drain', done);
        ctx.res.once('close', done);
      });
      return !ctx.signal.aborted;
    };
  }

  function finishSse(ctx: RequestContext): void {
    ctx.res.end('data: [DONE]\n\n');
  }

  async function chatCompletions(ctx: RequestContext, body: JsonObject): Promise<void> {
    checkModel(body);
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new RequestError(400, 'messages must be a non-empty array', 'messages', 'invalid_value');
    }
    let promptTokens = 0;
    let lastUser = '';
    messages.forEach((message, i) => {
      if (!isObject(message) || typeof message.role !== 'string') {
        throw new RequestError(400, `messages[${i}] must be an object with a role`, `messages[${i}]`, 'invalid_value');
      }
      const text = contentText(message.content);
      promptTokens += countWords(text);
      if (message.role === 'user') lastUser = text;
    });
    rejectMultipleChoices(body);
    const stream = optionalBoolean(body, 'stream') === true;
    const wantUsage = stream && includeUsage(body);
    const { tokens, finishReason } = plan(body, lastUser);
    const id = `chatcmpl-${++idCounter}`;
    const created = Math.floor(Date.now() / 1000);
    const total = usage(promptTokens, tokens.length);

    if (!stream) {
      if (!(await tokenPause(ctx, tokens.length))) return cancelled(ctx, id, 0, tokens.length);
      ctx.note = `${tokens.length} tokens, ${finishReason}`;
      sendJson(ctx.res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: options.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: tokens.join(''), refusal: null },
            logprobs: null,
            finish_reason: finishReason,
          },
        ],
        usage: total,
      });
      return;
    }

    const send = startSse(ctx);
    const chunk = (delta: JsonObject, finish: string | null): string =>
      JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created,
        model: options.model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        // With include_usage OpenAI puts usage: null on every chunk but the last.
        ...(wantUsage ? { usage: null } : {}),
      });
    if (!(await send(chunk({ role: 'assistant', content: '' }, null)))) return cancelled(ctx, id, 0, tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      if (!(await tokenPause(ctx, 1)) || !(await send(chunk({ content: tokens[i] }, null)))) {
        return cancelled(ctx, id, i, tokens.length);
      }
    }
    if (!(await send(chunk({}, finishReason)))) return cancelled(ctx, id, tokens.length, tokens.length);
    if (wantUsage) {
      const last = JSON.stringify({ id, object: 'chat.completion.chunk', created, model: options.model, choices: [], usage: total });
      if (!(await send(last))) return cancelled(ctx, id, tokens.length, tokens.length);
    }
    ctx.note = `stream, ${tokens.length} tokens, ${finishReason}`;
    finishSse(ctx);
  }

  async function completions(ctx: RequestContext, body: JsonObject): Promise<void> {
    checkModel(body);
    const prompts = promptList(body.prompt, 'prompt');
    rejectMultipleChoices(body);
    const stream = optionalBoolean(body, 'stream') === true;
    const wantUsage = stream && includeUsage(body);
    const plans = prompts.map((p) => plan(body, p));
    const promptTokens = prompts.reduce((sum, p) => sum + countWords(p), 0);
    const completionTokens = plans.reduce((sum, p) => sum + p.tokens.length, 0);
    const id = `cmpl-${++idCounter}`;
    const created = Math.floor(Date.now() / 1000);
    const total: Usage = usage(promptTokens, completionTokens);

    if (!stream) {
      if (!(await tokenPause(ctx, completionTokens))) return cancelled(ctx, id, 0, completionTokens);
      ctx.note = `${completionTokens} tokens`;
      sendJson(ctx.res, 200, {
        id,
        object: 'text_completion',
        created,
        model: options.model,
        choices: plans.map((p, index) => ({ index, text: p.tokens.join(''), logprobs: null, finish_reason: p.finishReason })),
        usage: total,
      });
      return;
    }

    const send = startSse(ctx);
    const chunk = (index: number, text: string, finish: string | null): string =>
      JSON.stringify({
        id,
        object: 'text_completion',
        created,
        model: options.model,
        choices: [{ index, text, logprobs: null, finish_reason: finish }],
        ...(wantUsage ? { usage: null } : {}),
      });
    let emitted = 0;
    for (let index = 0; index < plans.length; index++) {
      const { tokens, finishReason } = plans[index];
      for (const token of tokens) {
        if (!(await tokenPause(ctx, 1)) || !(await send(chunk(index, token, null)))) {
          return cancelled(ctx, id, emitted, completionTokens);
        }
        emitted++;
      }
      if (!(await send(chunk(index, '', finishReason)))) return cancelled(ctx, id, emitted, completionTokens);
    }
    if (wantUsage) {
      const last = JSON.stringify({ id, object: 'text_completion', created, model: options.model, choices: [], usage: total });
      if (!(await send(last))) return cancelled(ctx, id, emitted, completionTokens);
    }
    ctx.note = `stream, ${completionTokens} tokens`;
    finishSse(ctx);
  }

  function embeddings(ctx: RequestContext, body: JsonObject): void {
    checkModel(body);
    const inputs = promptList(body.input, 'input');
    const format = body.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') {
      throw new RequestError(400, "encoding_format must be 'float' or 'base64'", 'encoding_format', 'invalid_value');
    }
    const dimensions = optionalPositiveInt(body, 'dimensions');
    if (dimensions !== undefined && dimensions !== EMBEDDING_DIM) {
      throw new RequestError(400, `this model only produces ${EMBEDDING_DIM} dimensions`, 'dimensions', 'invalid_value');
    }
    const promptTokens = inputs.reduce((sum, text) => sum + countWords(text), 0);
    ctx.note = `${inputs.length} inputs`;
    sendJson(ctx.res, 200, {
      object: 'list',
      data: inputs.map((text, index) => {
        const vector = embed(text);
        return { object: 'embedding', index, embedding: format === 'base64' ? embeddingToBase64(vector) : vector };
      }),
      model: options.model,
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    });
  }

  function authorized(req: IncomingMessage): boolean {
    if (options.apiKey === null) return true;
    return req.headers.authorization === `Bearer ${options.apiKey}`;
  }

  async function route(ctx: RequestContext, path: string): Promise<void> {
    const { req, res } = ctx;
    const method = req.method ?? 'GET';

    if (path === '/health') {
      if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
      // llama-server's exact body while loading, since agents are written against it.
      if (!loaded) return sendJson(res, 503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
      return sendJson(res, 200, { status: 'ok' });
    }

    if (!path.startsWith('/v1/')) {
      return sendError(res, 404, openAIError(`Unknown path ${path}`, 'invalid_request_error', 'not_found'));
    }
    if (!loaded) return sendError(res, 503, openAIError('Loading model', 'unavailable_error', 'model_loading'));
    if (!authorized(req)) {
      return sendError(res, 401, openAIError('Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key'));
    }

    if (path === '/v1/models') {
      if (method !== 'GET') return methodNotAllowed(res, 'GET');
      return sendJson(res, 200, { object: 'list', data: [modelObject()] });
    }
    if (path.startsWith('/v1/models/')) {
      if (method !== 'GET') return methodNotAllowed(res, 'GET');
      const name = decodeURIComponent(path.slice('/v1/models/'.length));
      if (name !== options.model) {
        return sendError(res, 404, openAIError(`The model \`${name}\` does not exist.`, 'invalid_request_error', 'model_not_found', 'model'));
      }
      return sendJson(res, 200, modelObject());
    }

    if (!INFERENCE_PATHS.has(path)) {
      return sendError(res, 404, openAIError(`Unknown path ${path}`, 'invalid_request_error', 'not_found'));
    }
    if (method !== 'POST') return methodNotAllowed(res, 'POST');

    // Counted on arrival (after auth) so request N+1 dies before any answer, like an engine crash.
    inferenceRequests++;
    if (options.crashAfter !== null && inferenceRequests > options.crashAfter) {
      ctx.note = 'crash';
      hooks.onCrash(inferenceRequests);
      req.socket.destroy();
      return;
    }
    if (options.failStatus !== null) {
      const status = options.failStatus;
      ctx.note = 'injected failure';
      return sendError(res, status, openAIError(`injected failure: HTTP ${status} (--fail-status)`, errorTypeForStatus(status), 'injected_failure'));
    }

    const body = await readJson(req);
    if (path === '/v1/chat/completions') return chatCompletions(ctx, body);
    if (path === '/v1/completions') return completions(ctx, body);
    return embeddings(ctx, body);
  }

  function methodNotAllowed(res: ServerResponse, allow: string): void {
    res.setHeader('allow', allow);
    sendError(res, 405, openAIError('Method not allowed', 'invalid_request_error', 'method_not_allowed'));
  }

  const server = createServer((req, res) => {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0];
    res.setHeader('x-test-engine-model', options.model);
    const requestId = req.headers['x-request-id'];
    if (typeof requestId === 'string') res.setHeader('x-request-id', requestId);

    const abort = new AbortController();
    const ctx: RequestContext = { req, res, signal: abort.signal, note: '' };
    res.on('close', () => {
      // 'close' without a finished response means the client (or the crash) cut the connection.
      if (!res.writableFinished) abort.abort();
      const ms = (performance.now() - started).toFixed(1);
      const status = res.writableFinished ? String(res.statusCode) : 'aborted';
      hooks.log(`${req.method ?? '?'} ${path} ${status} ${ms}ms${ctx.note === '' ? '' : ` (${ctx.note})`}`);
    });

    route(ctx, path).catch((err: unknown) => {
      // A client that leaves mid-body makes the body read throw; there is no one left to answer.
      if (abort.signal.aborted || req.socket.destroyed) return;
      if (err instanceof RequestError) {
        sendError(res, err.status, openAIError(err.message, errorTypeForStatus(err.status), err.code, err.param));
        return;
      }
      hooks.log(`internal error on ${path}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      if (res.headersSent) res.destroy();
      else sendError(res, 500, openAIError('internal error in llmgw-test-engine', 'server_error', 'internal_error'));
    });
  });

  return {
    server,
    markLoaded: () => {
      loaded = true;
    },
    isLoaded: () => loaded,
  };
}
