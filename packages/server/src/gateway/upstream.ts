import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Pool } from 'undici';
import type { Model } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import type { RouteTarget } from '../controller/controller.js';
import type { AttemptOutcome } from './balancer.js';
import type { Metrics } from '../metrics.js';
import type { StoredKey } from '../store/store.js';
import type { ClientRequest } from './request.js';
import type { Traffic } from './traffic.js';
import { end, replyAsEvent, type SseRelay, type StreamContext } from './sse.js';
import { overBudget, type ReplyBudget, type ReplyHold } from './reply-budget.js';
import { findUsage, usageOfReply, type UsageMeter, type UsageReport } from './usage.js';
import { RESPONSES } from './request.js';
import { ResponsesTranslation, servesResponses, toChat } from './responses.js';
import { payloadFor } from './engine-adapters.js';

/** The engine's prefix cache capacity in tokens, sent by llmgw's own engines on completions. */
export const PREFIX_CACHE_HEADER = 'x-llmgw-prefix-cache-tokens';

/** One client request on its way through, built once when it is admitted. */
export interface Exchange extends ClientRequest, StreamContext {
  key: StoredKey;
}

/**
 * An attempt that failed before anything reached the client (no connection, no
 * headers in time, a 5xx, a body cut short), so another replica may be tried.
 */
export class RetryableUpstreamError extends Error {}

/**
 * The engines' side: one undici pool per engine endpoint, the requests in flight per
 * replica (what the balancer and the autoscaler read), cool-downs of replicas that
 * failed, and the attempt itself: one request to one replica, relayed to the client.
 */
export class Upstream {
  private readonly pools = new Map<string, Pool>();
  private readonly cooldownUntil = new Map<string, number>();
  /** Failed attempts in a row per replica, since its last answer: each doubles the next cool-down. */
  private readonly strikes = new Map<string, number>();

  /** Requests in flight on a replica (counted in `traffic`); bound once so the balancer can call it as is. */
  readonly inFlight: (replicaId: string) => number;

  constructor(
    private readonly traffic: Traffic,
    private readonly metrics: Metrics,
    private readonly sse: SseRelay,
    private readonly usage: UsageMeter,
    private readonly settings: { upstreamTimeoutMs: number; cooldownMs: number; maxReplyBytes: number; streamIdleTimeoutMs: number; maxEventBytes: number },
    /** What every non-streamed reply being held takes its bytes from. */
    private readonly replies: ReplyBudget,
  ) {
    this.inFlight = traffic.inFlight;
  }

  coolingDown(replicaId: string, now: number): boolean {
    return (this.cooldownUntil.get(replicaId) ?? 0) > now;
  }

  /**
   * Leaves a replica that failed out of routing for the cool-down: outlier ejection with
   * backoff, `--cooldown` after a first failure, doubling per failure in a row up to 16×,
   * until it answers again (`answered`).
   */
  coolDown(replicaId: string): void {
    const strikes = Math.min((this.strikes.get(replicaId) ?? 0) + 1, 5);
    this.strikes.set(replicaId, strikes);
    this.cooldownUntil.set(replicaId, Date.now() + this.settings.cooldownMs * 2 ** (strikes - 1));
  }

  /** The replica answered an attempt: its next failure cools it down from the start. */
  answered(replicaId: string): void {
    if (this.strikes.size) this.strikes.delete(replicaId);
  }

  /**
   * Forgets replicas that no longer exist: their connection pools, cool-downs and metric
   * labels. Replica changes are rare, so this runs off the request path.
   */
  prune(replicas: readonly { id: string; endpoint?: string }[]): void {
    const ids = new Set(replicas.map((r) => r.id));
    const endpoints = new Set(replicas.map((r) => r.endpoint).filter((e): e is string => e !== undefined));
    for (const id of [...this.cooldownUntil.keys()]) if (!ids.has(id)) this.cooldownUntil.delete(id);
    for (const id of [...this.strikes.keys()]) if (!ids.has(id)) this.strikes.delete(id);
    this.traffic.prune(ids);
    for (const [endpoint, pool] of [...this.pools]) {
      if (endpoints.has(endpoint)) continue;
      this.pools.delete(endpoint);
      // Requests still running on it finish; close() waits for them.
      void pool.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
  }

  private pool(endpoint: string): Pool {
    let p = this.pools.get(endpoint);
    if (!p) {
      // One connection per concurrent stream: HTTP/1.1 streams hold their connection.
      // Idle connections are let go after 4 s unless the engine says how long it keeps them:
      // uvicorn (vLLM, SGLang) closes them after 5 s without saying, and a request sent on
      // one as it closes fails.
      p = new Pool(endpoint, { connections: 512, pipelining: 1, keepAliveTimeout: 4_000, connectTimeout: 3_000 });
      this.pools.set(endpoint, p);
    }
    return p;
  }

  /**
   * Sends the request to one replica and relays its answer. Throws
   * `RetryableUpstreamError` while nothing has reached the client yet.
   * Resolves with what the balancer learns from: the usage and the engine's cache size.
   * @param fallbackFrom the model the client asked for, when `model` is its fallback
   * @param onFirstByte called when the engine's first byte arrives
   */
  async attempt(
    res: ServerResponse,
    ex: Exchange,
    model: Model,
    target: RouteTarget,
    payload: Buffer | string,
    fallbackFrom: string | undefined,
    onFirstByte?: () => void,
  ): Promise<AttemptOutcome> {
    // The Responses API on an engine that serves only chat completions: translated both ways.
    const tr = ex.path === RESPONSES && !servesResponses(model) ? new ResponsesTranslation(ex.body) : undefined;
    // On its base, an adapter is asked for by its own name (as `bodyFor` does).
    if (tr) payload = JSON.stringify(toChat(ex.body, ex.adapter && model.name === ex.model.name ? ex.adapter : model.name));
    // llama-server selects an adapter per request by index, not by name.
    payload = payloadFor(ex, model.name, target, payload);
    this.traffic.attemptStarted(target.replicaId, model.name);
    try {
      let up;
      for (let tries = 1; ; tries++) {
        const sentAt = Date.now();
        try {
          up = await this.pool(target.endpoint).request({
            path: tr ? '/v1/chat/completions' : ex.path,
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${target.apiKey}` },
            body: payload,
            // Aborts the engine request when the client leaves (undici needs only an EventTarget's two methods).
            signal: ex.signal,
            headersTimeout: this.settings.upstreamTimeoutMs,
            // A reply's silence mid-body: undici's timer wheel for a non-streamed request,
            // cheaper than a timer of our own per reply; a stream's relay keeps its own, to
            // end the stream with an error event.
            bodyTimeout: ex.stream ? 0 : this.settings.streamIdleTimeoutMs,
          });
          break;
        } catch (err) {
          if (ex.signal.aborted) throw err;
          // A kept-alive connection the engine closed (its idle timeout, 5 s in uvicorn and
          // Node) just as the request went out on it: the replica is fine, so the request
          // goes once more, on another connection, before the replica is cooled down. Only
          // a failure at once: one later may be a generation the engine was running
          // (a crash, a middlebox's reset), not worth running again on the same replica.
          if (tries === 1 && Date.now() - sentAt < STALE_CONNECTION_MS && closedConnection(err) && this.pools.has(target.endpoint)) continue;
          throw new RetryableUpstreamError((err as Error).message);
        }
      }
      const status = up.statusCode;
      if (status >= 500) {
        // Enough of the body for the message; the rest is not worth reading.
        const text = (await readUpTo(up.body, ERROR_BODY_BYTES, this.ownIdleMs(ex)).then(joined, () => undefined))?.toString('utf8') ?? '';
        throw new RetryableUpstreamError(`answered ${status} ${text.slice(0, 200)}`);
      }
      if (fallbackFrom) this.metrics.fallbacks.inc({ model: fallbackFrom, fallback: model.name });
      const outcome: AttemptOutcome = { answered: true, ...cacheTokens(up.headers[PREFIX_CACHE_HEADER]) };
      let usage: UsageReport;
      const headers: Record<string, string> = { 'x-llmgw-model': model.name, 'x-llmgw-replica': target.replicaId };
      const ctype = String(up.headers['content-type'] ?? 'application/json');
      if (ctype.startsWith('text/event-stream')) {
        // A translated stream carries the chat usage chunk for the relay to count and drop.
        const o = tr
          ? await this.sse.pipe(
              res,
              tr.stream(up.body, this.settings.maxEventBytes),
              headers,
              status,
              model.name,
              { ...ex, clientWantsUsage: false },
              onFirstByte,
            )
          : await this.sse.pipe(res, up.body, headers, status, model.name, ex, onFirstByte);
        this.usage.served(ex.key, model.name, target.replicaId, {
          usage: o.usage,
          relayed: o.relayed,
          failed: o.end === 'failed',
          cancelled: o.end === 'cancelled',
        });
        usage = o.usage;
        // The caller counts the client leaving.
        if (o.end === 'cancelled') return outcome;
      } else {
        // Headers of a non-streamed reply come when it is done: prefill and decode.
        onFirstByte?.();
        let reply = await this.readReply(res, ex, up.body, Number(up.headers['content-length'] ?? 0), status);
        // Usage is read from the engine's own reply, before any translation, so it counts the same way.
        let translatedUsage: UsageReport | undefined;
        if (tr && status < 400) {
          const whole = joined(reply);
          translatedUsage = findUsage(whole.toString('utf8'));
          let out: Buffer;
          try {
            out = tr.json(whole);
          } catch (err) {
            // An engine's 200 that is not JSON is its failure, counted as one.
            this.usage.failed(ex.key, model.name);
            this.metrics.countRequest(model.name, ex.path, 502);
            throw err;
          }
          reply = { chunks: [out], size: out.length };
        }
        if (res.headersSent) {
          // A cold-start stream already said 200: the engine's answer goes in the stream,
          // as an error event when it is one.
          end(res, replyAsEvent(joined(reply).toString('utf8'), status));
        } else {
          res.writeHead(status, { ...headers, 'content-type': ctype, 'content-length': String(reply.size) });
          // Chunk by chunk as they came: joining 64 MiB first would copy it on the event loop.
          if (!res.writableEnded && !res.destroyed) {
            res.cork();
            for (const c of reply.chunks) res.write(c);
            res.end();
          }
        }
        if (status < 400) {
          usage = translatedUsage ?? usageOfReply(reply.chunks, reply.size);
          this.usage.served(ex.key, model.name, target.replicaId, { usage });
        } else this.usage.failed(ex.key, model.name);
      }
      this.metrics.countRequest(model.name, ex.path, status);
      this.metrics.observeDuration(model.name, Number(process.hrtime.bigint() - ex.t0) / 1e9);
      if (usage && usage !== 'bad') outcome.usage = usage;
      return outcome;
    } finally {
      this.traffic.attemptEnded(target.replicaId);
    }
  }

  /**
   * A non-streamed reply, read whole into bytes taken from the reply budget: all at once
   * when `Content-Length` declares them, else chunk by chunk. The bytes are given back
   * when the response to the client closes (its write holds them until then), or at once
   * when the reply is refused. Over the per-reply cap: retryable; over the budget: 503.
   */
  private async readReply(res: ServerResponse, ex: Exchange, body: Readable, declared: number, status: number): Promise<Chunks> {
    const limit = this.settings.maxReplyBytes;
    if (declared > limit) {
      body.destroy();
      throw new RetryableUpstreamError(`sent a ${status} reply over the limit of ${limit} bytes`);
    }
    const hold = this.replies.hold();
    let buf: Chunks;
    try {
      if (declared > 0 && !hold.take(declared)) throw overBudget(this.replies);
      buf = await readUpTo(body, limit + 1, this.ownIdleMs(ex), declared > 0 ? undefined : hold);
      if (buf.size > limit) {
        body.destroy();
        throw new RetryableUpstreamError(`sent a ${status} reply over the limit of ${limit} bytes`);
      }
    } catch (err) {
      hold.release();
      body.destroy();
      if (err === OVER_BUDGET) throw overBudget(this.replies);
      // Nothing reached the client yet, so another replica may still answer.
      if (ex.signal.aborted || err instanceof RetryableUpstreamError || err instanceof DomainError) throw err;
      if ((err as { code?: string }).code === 'UND_ERR_BODY_TIMEOUT') throw new RetryableUpstreamError(idleMessage(this.settings.streamIdleTimeoutMs));
      throw new RetryableUpstreamError(`failed while sending its ${status} reply: ${(err as Error).message}`);
    }
    if (res.closed) hold.release();
    else res.once('close', () => hold.release());
    return buf;
  }

  /** The mid-body idle timeout `readUpTo` keeps itself: none where undici's `bodyTimeout` has it (a non-streamed request). */
  private ownIdleMs(ex: Exchange): number | undefined {
    return ex.stream ? this.settings.streamIdleTimeoutMs : undefined;
  }
}

/** The capacity header as a count, when it is one (an engine's headers are untrusted too). */
function cacheTokens(v: string | string[] | undefined): { prefixCacheTokens?: number } {
  const n = typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : undefined;
  return n === undefined ? {} : { prefixCacheTokens: n };
}

/** A body as the chunks it came in, `size` bytes in all. */
interface Chunks {
  chunks: Buffer[];
  size: number;
}

/** The chunks as one buffer (a copy unless there is one chunk). */
const joined = (b: Chunks): Buffer => (b.chunks.length === 1 ? b.chunks[0]! : Buffer.concat(b.chunks, b.size));

/** What `readUpTo` rejects with when the reply budget has no room for the next chunk. */
const OVER_BUDGET = new Error('over the reply budget');

const idleMessage = (ms: number) => `sent nothing for ${ms / 1000}s mid-body (--stream-idle-timeout)`;

/** How soon after it went out a request's connection must have closed for the request to be sent again. */
const STALE_CONNECTION_MS = 1000;

/** A connection that closed or reset before the engine's answer began (undici's and the socket's words for it). */
function closedConnection(err: unknown): boolean {
  const { code, message } = err as { code?: unknown; message?: unknown };
  // undici's UND_ERR_SOCKET also says "bad response" of an engine that misbehaves.
  return (code === 'UND_ERR_SOCKET' && message === 'other side closed') || code === 'ECONNRESET' || code === 'EPIPE';
}

/** How much of a 5xx body is read, for the message. */
const ERROR_BODY_BYTES = 4096;

/**
 * An engine's body, whole when it has at most `limit` bytes, else its first chunks up
 * to and past `limit` (the rest is not read): an engine cannot make the gateway buffer
 * without bound. With `hold`, each chunk takes its bytes from the reply budget first; one
 * that cannot rejects with {@link OVER_BUDGET}, reading no further. `idleMs`: the longest
 * silence between chunks, when undici's `bodyTimeout` does not keep it.
 */
function readUpTo(body: Readable, limit: number, idleMs: number | undefined, hold?: ReplyHold): Promise<Chunks> {
  // Listeners rather than for-await: this is every non-streamed reply, and the async
  // iterator costs more than the reading itself for a small one.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // An engine that stops halfway through a body is as stuck as one that stops mid-stream.
    const idle = idleMs === undefined ? undefined : setTimeout(() => body.destroy(new RetryableUpstreamError(idleMessage(idleMs))), idleMs);
    const done = () => {
      clearTimeout(idle);
      body.off('data', onData);
      resolve({ chunks, size });
    };
    const onData = (c: Buffer) => {
      idle?.refresh();
      if (hold && !hold.take(c.length)) {
        clearTimeout(idle);
        body.off('data', onData);
        reject(OVER_BUDGET);
        return;
      }
      chunks.push(c);
      size += c.length;
      if (size >= limit) {
        done();
        body.destroy();
      }
    };
    body.on('data', onData);
    body.once('end', done);
    body.once('error', (err) => {
      clearTimeout(idle);
      reject(err);
    });
  });
}
