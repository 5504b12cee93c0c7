import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import type { Logger } from 'pino';
import type { Model } from '@llmgw/shared';
import type { Controller, LoadSnapshot, LoadSource, RouteTarget } from '../controller/controller.js';
import { ACTIVE_REPLICA_STATES } from '../domain.js';
import type { ModelLoad } from '../reconcile/reconcile.js';
import type { KeyRing } from './keys.js';
import type { Metrics } from '../metrics.js';
import type { StoredKey } from '../store/store.js';

export interface GatewaySettings {
  maxBodyBytes: number;
  /** Longest wait for an engine's response headers; a non-streaming reply only has headers when it is done. */
  upstreamTimeoutMs: number;
  /** How long a replica that failed is left out of routing. */
  cooldownMs: number;
  /** Interval of `: keep-alive` comments on a stream that has no token yet. */
  keepAliveMs: number;
  /** How long a request for a model scaled to zero waits for a replica to be ready. */
  coldStartTimeoutMs: number;
}

const ENDPOINTS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings']);

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | null,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Errors that did not reach the client yet, so another replica may be tried. */
class RetryableUpstreamError extends Error {}

/**
 * The client-facing OpenAI-compatible endpoint. Raw node:http rather than express: this
 * is the hot path, and every microsecond here is added to every request (see
 * bench/gateway.bench.ts). Bodies are parsed once to read the model; responses stream
 * through without per-event JSON parsing, except the one usage event at the end.
 */
export class Gateway implements LoadSource {
  private readonly pools = new Map<string, Pool>();
  private readonly outstanding = new Map<string, number>();
  private readonly cooldownUntil = new Map<string, number>();
  private readonly modelInFlight = new Map<string, number>();
  private readonly lastRequest = new Map<string, number>();
  private readonly waiting = new Map<string, number>();
  private readonly replicaModel = new Map<string, string>();

  constructor(
    private readonly ctl: Controller,
    private readonly keys: KeyRing,
    private readonly metrics: Metrics,
    private readonly settings: GatewaySettings,
    private readonly log: Logger,
  ) {
    metrics.inFlightSource = () =>
      [...this.outstanding].map(([replica, value]) => ({ replica, value, model: this.replicaModel.get(replica) ?? '' }));
    ctl.events.on('replicas', () => this.prune());
  }

  /**
   * Forgets replicas that no longer exist: their connection pools, cool-downs and metric
   * labels. Replica changes are rare, so this runs off the request path.
   */
  private prune(): void {
    const replicas = this.ctl.listReplicas();
    const ids = new Set(replicas.map((r) => r.id));
    const endpoints = new Set(replicas.map((r) => r.endpoint).filter((e): e is string => e !== undefined));
    for (const id of [...this.cooldownUntil.keys()]) if (!ids.has(id)) this.cooldownUntil.delete(id);
    for (const id of [...this.replicaModel.keys()]) if (!ids.has(id) && !this.outstanding.has(id)) this.replicaModel.delete(id);
    for (const [endpoint, pool] of [...this.pools]) {
      if (endpoints.has(endpoint)) continue;
      this.pools.delete(endpoint);
      // Requests still running on it finish; close() waits for them.
      void pool.close().catch(() => {});
    }
  }

  /** The node:http request listener for the client listener. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((err: unknown) => {
      const e = err instanceof HttpError ? err : new HttpError(500, `internal error: ${(err as Error).message}`, 'server_error', null);
      if (!(err instanceof HttpError)) this.log.error({ err }, 'gateway error');
      sendError(res, e);
    });
  };

  inFlight(replicaId: string): number {
    return this.outstanding.get(replicaId) ?? 0;
  }

  /** What the autoscaler reads: in-flight requests, the last request, and cold-start waiters. */
  load(model: string): ModelLoad {
    const last = this.lastRequest.get(model);
    return { inFlight: this.modelInFlight.get(model) ?? 0, waiting: this.waiting.get(model) ?? 0, ...(last !== undefined ? { lastRequestMs: last } : {}) };
  }

  /** A copy of the traffic counters for one reconcile pass, so the controller holds no live view of them. */
  loadSnapshot(): LoadSnapshot {
    const models = new Map<string, ModelLoad>();
    for (const m of new Set([...this.modelInFlight.keys(), ...this.waiting.keys(), ...this.lastRequest.keys()])) models.set(m, this.load(m));
    return { inFlight: new Map(this.outstanding), models };
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t0 = process.hrtime.bigint();
    const url = req.url ?? '/';
    const path = url.split('?', 1)[0]!;
    const requestId = (req.headers['x-request-id'] as string | undefined) ?? randomUUID();
    res.setHeader('x-request-id', requestId);

    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
    const key = this.authenticate(req);
    if (path === '/v1/models' && req.method === 'GET') return sendJson(res, 200, this.modelList(key));
    if (!ENDPOINTS.has(path)) throw new HttpError(404, `no route ${req.method} ${path}`, 'invalid_request_error', 'unknown_url');
    if (req.method !== 'POST') throw new HttpError(405, `${path} takes POST`, 'invalid_request_error', 'method_not_allowed');

    const raw = await readBody(req, this.settings.maxBodyBytes);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new HttpError(400, `invalid JSON body: ${(e as Error).message}`, 'invalid_request_error', 'invalid_json');
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) {
      throw new HttpError(400, 'the body must be a JSON object', 'invalid_request_error', 'invalid_json');
    }
    if (typeof body.model !== 'string' || !body.model) throw new HttpError(400, 'model is required', 'invalid_request_error', 'missing_field', 'model');
    const requested = body.model;
    const model = this.ctl.catalogView.resolve(requested);
    if (!model) {
      const close = this.ctl.catalogView.suggest(requested);
      throw new HttpError(404, `The model \`${requested}\` does not exist${close.length ? `; did you mean ${close.map((c) => `\`${c}\``).join(', ')}?` : ''}`, 'invalid_request_error', 'model_not_found', 'model');
    }
    if (key.models.length && !key.models.includes(model.name)) {
      throw new HttpError(403, `this API key may not use model \`${model.name}\` (allowed: ${key.models.join(', ')})`, 'permission_error', 'model_not_allowed', 'model');
    }
    const admission = this.keys.admit(key);
    if (!admission.ok) {
      const msg = admission.reason === 'rpm' ? `rate limit of ${key.rpm} requests per minute reached for this key` : `limit of ${key.maxConcurrent} concurrent requests reached for this key`;
      throw new HttpError(429, msg, 'rate_limit_error', admission.reason === 'rpm' ? 'rate_limit_exceeded' : 'concurrency_limit_exceeded', null, { 'retry-after': String(admission.retryAfterS) });
    }
    this.lastRequest.set(model.name, Date.now());
    this.modelInFlight.set(model.name, (this.modelInFlight.get(model.name) ?? 0) + 1);
    try {
      await this.forward(req, res, { path, body, raw, key, model, requested, t0 });
    } finally {
      admission.release();
      this.modelInFlight.set(model.name, (this.modelInFlight.get(model.name) ?? 1) - 1);
    }
  }

  private authenticate(req: IncomingMessage): StoredKey {
    const h = req.headers.authorization;
    const m = h ? /^Bearer\s+(.+)$/i.exec(h) : null;
    const r = this.keys.authenticate(m?.[1]?.trim());
    if (r.ok) return r.key;
    const msg = {
      missing: 'You didn\u2019t provide an API key. Send it as "Authorization: Bearer <key>" (create one with ctl keys create).',
      invalid: 'Incorrect API key provided.',
      revoked: 'This API key has been revoked.',
      expired: 'This API key has expired.',
    }[r.reason];
    throw new HttpError(401, msg, 'invalid_request_error', 'invalid_api_key');
  }

  private modelList(key: StoredKey): unknown {
    const created = Math.floor(this.ctl.startedAtMs / 1000);
    const data: unknown[] = [];
    for (const m of this.ctl.models) {
      if (key.models.length && !key.models.includes(m.name)) continue;
      for (const id of [m.name, ...(m.aliases ?? [])]) data.push({ id, object: 'model', created, owned_by: 'llmgw' });
    }
    return { object: 'list', data };
  }

  private pick(targets: readonly RouteTarget[], tried: Set<string>, now: number): RouteTarget | undefined {
    let best: RouteTarget | undefined;
    let bestLoad = Infinity;
    let ties = 0;
    for (const t of targets) {
      if (tried.has(t.replicaId) || (this.cooldownUntil.get(t.replicaId) ?? 0) > now) continue;
      const load = this.outstanding.get(t.replicaId) ?? 0;
      if (load < bestLoad) {
        best = t;
        bestLoad = load;
        ties = 1;
      } else if (load === bestLoad && Math.random() * ++ties < 1) {
        // Reservoir sampling: each of the tied replicas is equally likely.
        best = t;
      }
    }
    return best;
  }

  private pool(endpoint: string): Pool {
    let p = this.pools.get(endpoint);
    if (!p) {
      // One connection per concurrent stream: HTTP/1.1 streams hold their connection.
      p = new Pool(endpoint, { connections: 512, pipelining: 1, keepAliveTimeout: 30_000, connectTimeout: 3_000 });
      this.pools.set(endpoint, p);
    }
    return p;
  }

  private async forward(
    req: IncomingMessage,
    res: ServerResponse,
    r: { path: string; body: Record<string, unknown>; raw: Buffer; key: StoredKey; model: Model; requested: string; t0: bigint },
  ): Promise<void> {
    const stream = r.body.stream === true;
    const so = r.body.stream_options as { include_usage?: boolean } | undefined;
    const clientWantsUsage = stream && so?.include_usage === true;
    const abort = new AbortController();
    let clientGone = false;
    res.on('close', () => {
      if (!res.writableFinished) {
        clientGone = true;
        abort.abort();
      }
    });

    const chain = [r.model.name, ...(r.model.fallbacks ?? [])];
    const failures: string[] = [];
    let overheadObserved = false;
    for (const modelName of chain) {
      const model = modelName === r.model.name ? r.model : this.ctl.catalogView.resolve(modelName);
      if (!model) continue;
      let targets = this.ctl.routes(model.name);
      if (targets.length === 0 && this.scaledToZero(model)) {
        if (stream && !res.headersSent) {
          // Headers now and comments while the replica starts: clients and proxies keep
          // the connection instead of timing out.
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-llmgw-model': model.name });
          res.write(': keep-alive\n\n');
        }
        const why = await this.coldStart(model, res, stream, abort.signal);
        if (clientGone) return;
        targets = this.ctl.routes(model.name);
        if (targets.length === 0) failures.push(`${model.name}: ${why}`);
      }
      if (targets.length === 0) {
        if (!failures.some((f) => f.startsWith(`${model.name}:`))) failures.push(`${model.name}: ${this.notReadyReason(model.name)}`);
        continue;
      }
      // Rewrite the body only when something must change, so the common case forwards the client's bytes.
      let payload: Buffer | string = r.raw;
      if (r.requested !== model.name || (stream && !clientWantsUsage)) {
        const b: Record<string, unknown> = { ...r.body, model: model.name };
        if (stream && !clientWantsUsage) b.stream_options = { ...(so ?? {}), include_usage: true };
        payload = JSON.stringify(b);
      }
      const tried = new Set<string>();
      for (let target = this.pick(targets, tried, Date.now()); target; target = this.pick(targets, tried, Date.now())) {
        tried.add(target.replicaId);
        if (clientGone) return;
        if (!overheadObserved) {
          this.metrics.overhead.observe(Number(process.hrtime.bigint() - r.t0) / 1e9);
          overheadObserved = true;
        }
        try {
          await this.attempt(req, res, { ...r, model, target, payload, stream, clientWantsUsage, abort, fallbackFrom: model.name !== r.model.name ? r.model.name : undefined });
          return;
        } catch (err) {
          if (clientGone) {
            this.metrics.cancelled.inc({ model: model.name });
            return;
          }
          if (!(err instanceof RetryableUpstreamError)) throw err;
          failures.push(`${model.name} replica ${target.replicaId}: ${err.message}`);
          this.cooldownUntil.set(target.replicaId, Date.now() + this.settings.cooldownMs);
          this.metrics.retries.inc({ model: model.name });
          this.log.warn({ replica: target.replicaId, model: model.name, err: err.message }, 'upstream failed before the first byte; trying another replica');
        }
      }
    }
    this.keys.recordUsage(r.key.id, r.model.name, { error: true });
    this.metrics.countRequest(r.model.name, r.path, 503);
    if (res.headersSent) {
      // A cold-start stream already said 200; the failure goes in the stream.
      const msg = JSON.stringify({ error: { message: `no replica could serve \`${r.model.name}\`: ${failures.join('; ')}`, type: 'server_error', param: null, code: 'no_ready_replica' } });
      res.end(`data: ${msg}\n\n`);
      return;
    }
    throw new HttpError(
      503,
      `no replica could serve \`${r.model.name}\`${chain.length > 1 ? ' or its fallbacks' : ''}: ${failures.join('; ')}`,
      'server_error',
      'no_ready_replica',
      null,
      { 'retry-after': '5' },
    );
  }

  /** A model with `min: 0` and no replica at all: a request starts one. */
  private scaledToZero(model: Model): boolean {
    if ((model.scaling?.min ?? 1) !== 0) return false;
    return !this.ctl.listReplicas().some((r) => r.model === model.name && ACTIVE_REPLICA_STATES.has(r.state));
  }

  /**
   * Asks for a replica and waits until one is ready, placement fails, the client leaves
   * or the cold-start timeout passes. Returns why it gave up (when it did).
   */
  private async coldStart(model: Model, res: ServerResponse, stream: boolean, signal: AbortSignal): Promise<string> {
    this.waiting.set(model.name, (this.waiting.get(model.name) ?? 0) + 1);
    const started = Date.now();
    const keepAlive = stream ? setInterval(() => res.write(': keep-alive\n\n'), this.settings.keepAliveMs) : undefined;
    this.log.info({ model: model.name }, 'request for a model at zero replicas; starting one');
    this.ctl.notify();
    try {
      for (;;) {
        if (this.ctl.routes(model.name).length > 0) return '';
        if (signal.aborted) return 'client left';
        const attempt = this.ctl.lastAttempt(model.name);
        const placed = this.ctl.listReplicas().some((r) => r.model === model.name && ACTIVE_REPLICA_STATES.has(r.state));
        if (attempt && attempt.atMs >= started && !attempt.outcome.placement && !placed) return `cannot be placed: ${attempt.outcome.summary}`;
        const failed = this.ctl.listReplicas().find((r) => r.model === model.name && r.state === 'failed' && r.createdAtMs >= started);
        if (failed) return `the replica started for this request failed: ${failed.error ?? 'unknown error'}`;
        if (Date.now() - started >= this.settings.coldStartTimeoutMs) return `no replica was ready within ${this.settings.coldStartTimeoutMs / 1000}s of starting one`;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(t);
            this.ctl.events.off('replicas', done);
            signal.removeEventListener('abort', done);
            resolve();
          };
          const t = setTimeout(done, 250);
          this.ctl.events.on('replicas', done);
          signal.addEventListener('abort', done);
        });
      }
    } finally {
      if (keepAlive) clearInterval(keepAlive);
      this.waiting.set(model.name, (this.waiting.get(model.name) ?? 1) - 1);
    }
  }

  private notReadyReason(model: string): string {
    const replicas = this.ctl.listReplicas().filter((x) => x.model === model);
    if (replicas.length) return `no ready replica (${replicas.map((x) => `${x.id} ${x.state}`).join(', ')})`;
    const attempt = this.ctl.lastAttempt(model);
    if (!attempt) return 'not placed yet';
    const rs = attempt.outcome.rejections;
    const detail = rs.slice(0, 3).map((x) => `${x.node ?? x.pool ?? x.profile}: ${x.reason}`).join('; ');
    return `not placed: ${attempt.outcome.summary}${detail ? ` (${detail}${rs.length > 3 ? `; ${rs.length - 3} more in ctl explain ${model}` : ''})` : ''}`;
  }

  private async attempt(
    _req: IncomingMessage,
    res: ServerResponse,
    a: {
      path: string; key: StoredKey; model: Model; target: RouteTarget; payload: Buffer | string; stream: boolean;
      clientWantsUsage: boolean; abort: AbortController; t0: bigint; fallbackFrom: string | undefined;
    },
  ): Promise<void> {
    const { target, model } = a;
    const load = (this.outstanding.get(target.replicaId) ?? 0) + 1;
    this.outstanding.set(target.replicaId, load);
    this.replicaModel.set(target.replicaId, model.name);
    let status = 0;
    try {
      let up;
      try {
        up = await this.pool(target.endpoint).request({
          path: a.path,
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${target.apiKey}` },
          body: a.payload,
          signal: a.abort.signal,
          headersTimeout: this.settings.upstreamTimeoutMs,
          bodyTimeout: 0,
        });
      } catch (err) {
        if (a.abort.signal.aborted) throw err;
        throw new RetryableUpstreamError((err as Error).message);
      }
      status = up.statusCode;
      if (status >= 500) {
        const text = await up.body.text().catch(() => '');
        throw new RetryableUpstreamError(`answered ${status} ${text.slice(0, 200)}`);
      }
      if (a.fallbackFrom) this.metrics.fallbacks.inc({ model: a.fallbackFrom, fallback: model.name });
      const headers: Record<string, string> = { 'x-llmgw-model': model.name, 'x-llmgw-replica': target.replicaId };
      const ctype = String(up.headers['content-type'] ?? 'application/json');
      if (ctype.startsWith('text/event-stream')) {
        await this.pipeStream(res, up.body, headers, status, a);
      } else {
        let buf: Buffer;
        try {
          buf = Buffer.from(await up.body.arrayBuffer());
        } catch (err) {
          // Nothing reached the client yet, so another replica may still answer.
          if (a.abort.signal.aborted) throw err;
          throw new RetryableUpstreamError(`failed while sending its ${status} reply: ${(err as Error).message}`);
        }
        if (res.headersSent) {
          // A cold-start stream already said 200: the engine's answer goes in the stream,
          // as an error event when it is one.
          res.end(`data: ${status >= 400 ? streamError(buf.toString('utf8'), status) : buf.toString('utf8')}\n\n`);
        } else {
          res.writeHead(status, { ...headers, 'content-type': ctype, 'content-length': String(buf.length) });
          res.end(buf);
        }
        if (status < 400) this.countUsage(a.key, model.name, findUsage(buf.toString('utf8')));
        else this.keys.recordUsage(a.key.id, model.name, { error: true });
      }
      this.metrics.countRequest(model.name, a.path, status);
      this.metrics.observeDuration(model.name, Number(process.hrtime.bigint() - a.t0) / 1e9);
    } finally {
      const left = (this.outstanding.get(target.replicaId) ?? 1) - 1;
      // Forget replicas with nothing in flight so the map and the metric do not grow forever.
      if (left > 0) this.outstanding.set(target.replicaId, left);
      else this.outstanding.delete(target.replicaId);
    }
  }

  /**
   * Passes SSE through as it arrives. Events are framed by blank lines; only an event
   * that carries usage (`"choices":[]` or `"choices":null`) is parsed, to count tokens
   * and, when the client did not ask for usage, to drop it again.
   */
  private async pipeStream(
    res: ServerResponse,
    body: AsyncIterable<Buffer>,
    headers: Record<string, string>,
    status: number,
    a: { key: StoredKey; model: Model; clientWantsUsage: boolean; abort: AbortController; t0: bigint },
  ): Promise<void> {
    if (!res.headersSent) {
      res.writeHead(status, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.flushHeaders();
    }
    let first = true;
    const keepAlive = setInterval(() => {
      if (first) res.write(': keep-alive\n\n');
    }, this.settings.keepAliveMs);
    // Bytes of an event not yet complete. Kept as bytes, not text, so a multi-byte
    // character split across two chunks is decoded whole; an event boundary ("\n\n")
    // never falls inside a UTF-8 sequence.
    let pending: Buffer = EMPTY;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
    try {
      for await (const chunk of body) {
        if (first) {
          first = false;
          this.metrics.observeTtft(a.model.name, Number(process.hrtime.bigint() - a.t0) / 1e9);
        }
        // The common case: whole events with no usage in them go out as the same bytes.
        if (pending.length === 0 && endsWithBlankLine(chunk) && chunk.indexOf(USAGE_MARK_EMPTY) === -1 && chunk.indexOf(USAGE_MARK_NULL) === -1) {
          if (!res.write(chunk)) await drained(res);
          continue;
        }
        const buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        const end = buf.lastIndexOf(BLANK_LINE);
        if (end === -1) {
          pending = buf;
          continue;
        }
        pending = buf.subarray(end + 2);
        const events = buf.subarray(0, end).toString('utf8').split('\n\n');
        let out = '';
        for (const ev of events) {
          if (ev.includes('"choices":[]') || ev.includes('"choices":null')) {
            const found = findUsage(ev.replace(/^data: ?/, ''));
            if (found) usage = found;
            if (!a.clientWantsUsage) continue;
          }
          out += `${ev}\n\n`;
        }
        if (out && !res.write(out)) await drained(res);
      }
      if (pending.length) res.write(pending);
      res.end();
      this.countUsage(a.key, a.model.name, usage);
    } catch (err) {
      if (a.abort.signal.aborted) throw err;
      // Bytes already reached the client, so no retry: say so in the stream, as the SDKs expect.
      const msg = JSON.stringify({ error: { message: `the engine failed mid-stream: ${(err as Error).message}`, type: 'server_error', param: null, code: 'upstream_error' } });
      res.end(`data: ${msg}\n\n`);
      this.keys.recordUsage(a.key.id, a.model.name, { error: true });
    } finally {
      clearInterval(keepAlive);
    }
  }

  private countUsage(key: StoredKey, model: string, usage: { prompt_tokens?: number; completion_tokens?: number } | undefined): void {
    const promptTokens = usage?.prompt_tokens ?? 0;
    const completionTokens = usage?.completion_tokens ?? 0;
    this.keys.recordUsage(key.id, model, { promptTokens, completionTokens });
    if (promptTokens) this.metrics.countTokens(model, 'prompt', promptTokens);
    if (completionTokens) this.metrics.countTokens(model, 'completion', completionTokens);
  }
}

const USAGE_MARK_EMPTY = Buffer.from('"choices":[]');
const USAGE_MARK_NULL = Buffer.from('"choices":null');
const BLANK_LINE = Buffer.from('\n\n');
const EMPTY = Buffer.alloc(0);

/**
 * Waits until a slow client has taken what was written (or has gone). Reading from the
 * engine pauses meanwhile, so a slow client slows its own stream instead of making the
 * gateway buffer without limit.
 */
function drained(res: ServerResponse): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function endsWithBlankLine(b: Buffer): boolean {
  return b.length >= 2 && b[b.length - 1] === 10 && b[b.length - 2] === 10;
}

function findUsage(json: string): { prompt_tokens?: number; completion_tokens?: number } | undefined {
  if (!json.includes('"usage"')) return undefined;
  try {
    const u = (JSON.parse(json) as { usage?: { prompt_tokens?: number; completion_tokens?: number } | null }).usage;
    return u ?? undefined;
  } catch {
    return undefined;
  }
}

/** An engine's error reply as one SSE payload `{"error": {...}}`, keeping its own error object when it has one. */
function streamError(text: string, status: number): string {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (parsed && typeof parsed === 'object' && parsed.error && typeof parsed.error === 'object') return JSON.stringify({ error: parsed.error });
  } catch {
    // not JSON: wrapped below
  }
  return JSON.stringify({ error: { message: `the engine answered ${status}: ${text.slice(0, 200)}`, type: 'server_error', param: null, code: 'upstream_error' } });
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit) {
      req.resume();
      reject(new HttpError(413, `request body of ${declared} bytes is over the limit of ${limit}`, 'invalid_request_error', 'request_too_large'));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new HttpError(413, `request body is over the limit of ${limit} bytes`, 'invalid_request_error', 'request_too_large'));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

function sendError(res: ServerResponse, e: HttpError): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const headers: Record<string, string> = { ...e.headers };
  // Quota and permission errors will not pass on retry; say so to the SDKs.
  if (e.status === 429 && e.code === 'rate_limit_exceeded') headers['x-should-retry'] = 'true';
  if (e.status === 401 || e.status === 403 || e.status === 404) headers['x-should-retry'] = 'false';
  sendJson(res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.code } }, headers);
}
