import { timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { InferenceBackend } from './backend.js';
import { EngineError, errorBody } from './errors.js';
import { readJson } from './json.js';
import { PREFIX_CACHE_TOKENS_HEADER } from './openai.js';
import { EngineRequest } from './request.js';

export interface EngineHttpOptions {
  /** The program's name, for internal-error messages. */
  program: string;
  /** The model name clients must use. */
  servedName: string;
  /** The engine key: when set, /v1/* need `Authorization: Bearer KEY`. */
  apiKey: string | null;
  /** One line per request and per notable event. */
  log(line: string): void;
  /** Set on every response (the test engine names its model, so tests see who answered). */
  headers?: Readonly<Record<string, string>>;
  /** Prometheus text for GET /metrics, loaded or not; without it /metrics is an unknown path. */
  metrics?(): string;
  /** Log /health and /metrics requests too (default: only the others, since probes are constant). */
  logProbes?: boolean;
}

export interface EngineHttp {
  server: Server;
  /** The model is loaded: /health turns 200 and /v1/* start answering. */
  setBackend(backend: InferenceBackend): void;
  isLoaded(): boolean;
}

const PROBE_PATHS = new Set(['/health', '/metrics']);

type Handler = 'chatCompletions' | 'completions' | 'embeddings';
const INFERENCE: ReadonlyMap<string, Handler> = new Map([
  ['/v1/chat/completions', 'chatCompletions'],
  ['/v1/completions', 'completions'],
  ['/v1/embeddings', 'embeddings'],
]);

/** Keys compared in constant time, so response timing does not leak a prefix. */
export function keyMatches(header: string | undefined, key: string): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice('Bearer '.length));
  const want = Buffer.from(key);
  return given.length === want.length && timingSafeEqual(given, want);
}

function allowOnly(r: EngineRequest, methods: readonly string[]): void {
  if (methods.includes(r.req.method ?? 'GET')) return;
  r.setHeader('allow', methods.join(', '));
  throw new EngineError('method_not_allowed', 'Method not allowed');
}

function unknownPath(path: string): EngineError {
  return new EngineError('not_found', `Unknown path ${path}`);
}

/**
 * An engine's HTTP side on node:http: OpenAI's API in front of an {@link InferenceBackend}.
 * It can listen before the model is loaded (llama-server's behaviour): /health says 503
 * "Loading model" until {@link EngineHttp.setBackend}, so the agent can tell "still
 * loading" from "dead".
 *
 *     request ─▶ /health, /metrics ─▶ answered here
 *             ─▶ /v1/* ─▶ loaded? ─▶ engine key ─▶ /v1/models here
 *                                                ─▶ method ─▶ admit ─▶ JSON body ─▶ backend
 *     any EngineError thrown on the way ─▶ its status and OpenAI's error body
 */
export function createEngineHttp(options: EngineHttpOptions): EngineHttp {
  let backend: InferenceBackend | null = null;

  async function route(r: EngineRequest, path: string): Promise<void> {
    if (path === '/health') {
      allowOnly(r, ['GET', 'HEAD']);
      // llama-server's exact body while loading, since agents are written against it.
      if (backend === null) return r.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
      return r.json(200, { status: 'ok' });
    }
    if (path === '/metrics' && options.metrics !== undefined) {
      allowOnly(r, ['GET']);
      return r.text(200, 'text/plain; version=0.0.4', options.metrics());
    }
    if (!path.startsWith('/v1/')) throw unknownPath(path);
    if (backend === null) throw new EngineError('model_loading', 'Loading model');
    if (options.apiKey !== null && !keyMatches(r.req.headers.authorization, options.apiKey)) {
      throw new EngineError('invalid_api_key', 'Incorrect API key provided.');
    }
    const b = backend;
    if (path === '/v1/models') {
      allowOnly(r, ['GET']);
      return r.json(200, { object: 'list', data: [b.model()] });
    }
    if (path.startsWith('/v1/models/')) {
      allowOnly(r, ['GET']);
      const raw = path.slice('/v1/models/'.length);
      const name = decodeName(raw);
      if (name !== options.servedName)
        throw new EngineError('model_not_found', `The model \`${(name ?? raw).slice(0, 64)}\` does not exist.`, { param: 'model' });
      return r.json(200, b.model());
    }
    const handler = INFERENCE.get(path);
    if (handler === undefined) throw unknownPath(path);
    allowOnly(r, ['POST']);
    if (handler !== 'embeddings' && b.prefixCacheTokens !== undefined) r.setHeader(PREFIX_CACHE_TOKENS_HEADER, String(b.prefixCacheTokens));
    if (b.admit !== undefined && !b.admit(r)) return;
    const body = await readJson(r.req);
    return b[handler](r, body);
  }

  const server = createServer((req, res) => {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    for (const [name, value] of Object.entries(options.headers ?? {})) res.setHeader(name, value);
    const requestId = req.headers['x-request-id'];
    if (typeof requestId === 'string') res.setHeader('x-request-id', requestId);
    const r = new EngineRequest(req, res);
    res.on('close', () => {
      // 'close' before the response finished means the client went away: stop its work now.
      if (!res.writableFinished) r.clientLeft();
      if (options.logProbes !== true && PROBE_PATHS.has(path)) return;
      const ms = (performance.now() - started).toFixed(1);
      const status = res.writableFinished ? String(res.statusCode) : 'aborted';
      // For a cancelled generation the backend's 'cancelled …' line follows once it has really stopped.
      options.log(`${req.method ?? '?'} ${path} ${status} ${ms}ms${r.note === '' ? '' : ` (${r.note})`}`);
    });

    route(r, path).catch((err: unknown) => {
      // A client that leaves mid-body makes the body read throw; there is no one left to answer.
      if (r.signal.aborted || req.socket.destroyed) return;
      const refused = err instanceof EngineError;
      if (!refused) options.log(`internal error on ${path}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      // Midway through a stream there is no status left to send; cutting it off says "failed".
      if (res.headersSent) return r.destroy();
      if (refused) return r.json(err.status, errorBody(err));
      const message = `internal error in ${options.program}: ${err instanceof Error ? err.message : String(err)}`;
      r.json(500, errorBody(new EngineError('internal_error', message)));
    });
  });

  return {
    server,
    setBackend: (b) => {
      backend = b;
    },
    isLoaded: () => backend !== null,
  };
}

/** A model name from the path; a bad `%`-escape names no model (404), not an engine fault. */
function decodeName(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}
