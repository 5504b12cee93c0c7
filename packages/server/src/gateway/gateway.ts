import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Model } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { ModelLoad } from '../reconcile/reconcile.js';
import type { StoredKey } from '../store/store.js';
import { PRIORITY_HEADER, admitLimits, authenticate, bandOf, checkModel, mayUse } from './admission.js';
import { AdapterAffinity } from './adapter-affinity.js';
import { LeastLoaded, type Balancer } from './balancer.js';
import { CacheAware } from './cache-aware.js';
import { ClientLeft } from './client-left.js';
import { ColdStart } from './cold-start.js';
import type { GatewayController } from './controller-view.js';
import { asDomainError, sendError, sendJson } from './errors.js';
import { Fallbacks, routingOf } from './fallbacks.js';
import { FlowControl, type FlowSettings } from './flow.js';
import { BANDS, type Band } from './fair-queue.js';
import type { KeyRing } from './keys.js';
import { BYTES_PER_TOKEN } from './prefix.js';
import { ReplyBudget } from './reply-budget.js';
import { ENDPOINTS, RESPONSES, clip, parseRequest, readBody } from './request.js';
import { refuseUntranslatable, servesResponses } from './responses.js';
import { DEFAULT_SATURATION, estimatedWaitS, isSaturated, pressures, type LoadReader, type SaturationSettings } from './saturation.js';
import { SseRelay } from './sse.js';
import type { Traffic } from './traffic.js';
import { Upstream, type Exchange } from './upstream.js';
import { UsageMeter } from './usage.js';

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
  /** What `/healthz` answers (the store's state); `ok` when absent. */
  health?: () => object;
  /** Longest silence of an engine mid-stream (after its headers) before the stream ends with an error event. */
  streamIdleTimeoutMs: number;
  /** Largest non-streamed engine reply read; a larger one fails the attempt. */
  maxReplyBytes?: number;
  /** Bytes of non-streamed replies held at once across all requests (`--reply-buffer`); a reply past it gets 503 `overloaded`. */
  replyBufferBytes?: number;
  /** Largest single SSE event from an engine; a larger one ends the stream with an error event. */
  maxEventBytes?: number;
  /** Prefix cache capacity, in tokens, assumed for a replica whose engine does not send `x-llmgw-prefix-cache-tokens`. */
  prefixCacheTokens?: number;
  /** Flow control's queue limits, TTL and saturation bound (README.md, "Flow control"); the documented defaults when absent. */
  flow?: FlowSettings;
}

/** Engine replies this large are not believed: 64 MiB holds a large batch of embeddings. */
export const DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024;
/** Four of the largest replies at once: enough for every ordinary reply, little next to a server's memory. */
export const DEFAULT_REPLY_BUFFER_BYTES = 256 * 1024 * 1024;
/** One streamed event: a token with its logprobs is a few KiB. */
export const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024;

/**
 * The client-facing OpenAI-compatible endpoint, composed of its steps (README.md):
 * route, authenticate, read the body, admit, then forward through the fallback chain.
 * Raw node:http rather than express: this is the hot path, and every microsecond here
 * is added to every request (see bench/gateway.bench.mjs). Bodies are parsed once to
 * read the model; responses stream through without per-event JSON parsing, except the
 * one usage event at the end.
 */
export class Gateway {
  private readonly upstream: Upstream;
  private readonly coldStart: ColdStart;
  private readonly fallbacks: Fallbacks;
  /** Requests held in the gateway while every replica of their model is saturated. */
  readonly flow: FlowControl;
  /** The LoRA adapters the gateway takes a replica to hold, least recently used first (`ctl replicas -o wide`). */
  readonly adapters: (replicaId: string) => string[];
  /** The bytes of non-streamed replies held now and their bound (`--reply-buffer`). */
  readonly replies: ReplyBudget;

  /** Requests waiting per model and band, for the metrics at scrape time. */
  queued(): { model: string; band: string; value: number }[] {
    return this.flow.depths();
  }

  /** Requests of one model waiting per band, for the dashboard's model page. */
  queuedFor(model: string): Record<Band, number> {
    return Object.fromEntries(BANDS.map((b) => [b, this.flow.waiting(model, b)])) as Record<Band, number>;
  }

  /** How each model's load is read (the flow control's view). */
  private readonly loadOf: (m: Model) => LoadReader;
  private readonly saturationSettings: SaturationSettings;

  /**
   * Each routed replica's pressure as flow control judges it, for the metrics at scrape
   * time: whether it is saturated, and its estimated queue wait where its prefill rate is
   * known (or, as for routing, the mean of its model's measured replicas).
   */
  saturation(): { model: string; replica: string; saturated: boolean; waitS?: number }[] {
    const out: { model: string; replica: string; saturated: boolean; waitS?: number }[] = [];
    for (const m of this.ctl.models) {
      const ids = this.ctl.routes(m.name).map((t) => t.replicaId);
      if (!ids.length) continue;
      const load = this.loadOf(m);
      const ps = pressures(
        ids,
        (id) => load.uncached(id),
        (id) => load.rate(id),
        (id) => load.inFlight(id),
      );
      ps.forEach((p, i) => {
        const waitS = estimatedWaitS(p);
        out.push({ model: m.name, replica: ids[i]!, saturated: isSaturated(p, this.saturationSettings), ...(waitS !== undefined ? { waitS } : {}) });
      });
    }
    return out;
  }

  constructor(
    private readonly ctl: GatewayController,
    private readonly keys: KeyRing,
    private readonly metrics: Metrics,
    /** Where it counts its requests; the controller and the metrics read the same (`Traffic`). */
    private readonly traffic: Traffic,
    private readonly settings: GatewaySettings,
    private readonly log: Logger,
    /** One policy for every model, whatever the catalog says (tests); else each model's `routing`. */
    balancer?: Balancer,
  ) {
    const usage = new UsageMeter(keys, metrics, log);
    const maxEventBytes = settings.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    const sse = new SseRelay(metrics, { keepAliveMs: settings.keepAliveMs, streamIdleTimeoutMs: settings.streamIdleTimeoutMs, maxEventBytes });
    this.replies = new ReplyBudget(settings.replyBufferBytes ?? DEFAULT_REPLY_BUFFER_BYTES);
    this.upstream = new Upstream(
      traffic,
      metrics,
      sse,
      usage,
      { ...settings, maxReplyBytes: settings.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES, maxEventBytes },
      this.replies,
    );
    this.coldStart = new ColdStart(ctl, traffic, settings, log);
    const leastLoaded = new LeastLoaded();
    const cacheAware = new CacheAware({ prefixCacheTokens: settings.prefixCacheTokens }, metrics);
    const routed = balancer ?? cacheAware;
    const ca = routed instanceof CacheAware ? routed : cacheAware;
    const cacheAwareLoad: LoadReader = { uncached: (id) => ca.uncachedInFlight(id), rate: (id) => ca.prefillRate(id), inFlight: this.upstream.inFlight };
    const inFlightLoad: LoadReader = { uncached: () => 0, rate: () => undefined, inFlight: this.upstream.inFlight };
    const policyOf = (m: Model) => balancer ?? (routingOf(m) === 'least-loaded' ? leastLoaded : cacheAware);
    // A model with LoRA adapters routes by adapter first, its own policy within (issue 31).
    const affinities = new Map<string, AdapterAffinity>();
    const adapterSlots = new Map<string, number | undefined>();
    const adapterCounts = {
      loaded: (model: string, adapter: string) => metrics.adapterLoads.inc({ model, adapter }),
      unloaded: (model: string, adapter: string) => metrics.adapterUnloads.inc({ model, adapter }),
    };
    const balancerOf = (m: Model): Balancer => {
      if (!m.adapters?.length) return policyOf(m);
      let a = affinities.get(m.name);
      if (!a) affinities.set(m.name, (a = new AdapterAffinity(policyOf(m), m.name, adapterCounts, (id) => adapterSlots.get(id))));
      // From the catalog as it is now: `adapter_routing` restarts nothing (not in the revision).
      a.prefer = m.adapter_routing !== 'none';
      return a;
    };
    this.adapters = (replicaId) => {
      for (const a of affinities.values()) {
        const held = a.loaded(replicaId);
        if (held.length) return held;
      }
      return [];
    };
    // Only cache-aware routing keeps uncached tokens and prefill rates; other policies are judged by requests in flight.
    this.loadOf = (m) => (policyOf(m) instanceof CacheAware ? cacheAwareLoad : inFlightLoad);
    this.saturationSettings = { ...DEFAULT_SATURATION, ...settings.flow?.saturation };
    this.flow = new FlowControl(
      {
        routes: (m) => ctl.routes(m),
        eligible: (id) => !this.upstream.coolingDown(id, Date.now()),
        load: this.loadOf,
      },
      settings.flow,
      Date.now,
      metrics,
    );
    this.fallbacks = new Fallbacks(ctl, this.upstream, balancerOf, this.coldStart, usage, metrics, log, (m) => this.flow.freed(m));
    ctl.events.on('replicas', () => {
      const replicas = ctl.listReplicas();
      this.upstream.prune(replicas);
      usage.prune(new Set(replicas.map((r) => r.id)));
      // A replica that is not ready has lost its cache, or will have when it is back.
      const ready = new Set(replicas.filter((r) => r.state === 'ready').map((r) => r.id));
      (balancer ?? cacheAware).retain?.(ready);
      for (const r of replicas) adapterSlots.set(r.id, r.spec?.maxLoadedAdapters);
      for (const id of adapterSlots.keys()) if (!ready.has(id)) adapterSlots.delete(id);
      for (const a of affinities.values()) a.retain(ready);
      this.flow.freedAll();
    });
  }

  /** The node:http request listener for the client listener. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((err: unknown) => {
      // A body refused unread is still read, and dropped, so the client gets the answer
      // instead of a reset connection.
      req.resume();
      const e = asDomainError(err, (x) => this.log.error({ err: x }, 'gateway error'));
      if (e.details.reason) this.metrics.rateLimited.inc({ reason: e.details.reason });
      sendError(res, e);
    });
  };

  /** Requests in flight on a replica, for the controller (drains wait for zero). */
  inFlight(replicaId: string): number {
    return this.traffic.inFlight(replicaId);
  }

  /** What the autoscaler reads of `model` (`Traffic.load`). */
  load(model: string): ModelLoad {
    return this.traffic.load(model);
  }

  async close(): Promise<void> {
    this.flow.close();
    await this.upstream.close();
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t0 = process.hrtime.bigint();
    const url = req.url ?? '/';
    const path = url.split('?', 1)[0]!;
    const requestId = (req.headers['x-request-id'] as string | undefined) ?? randomUUID();
    res.setHeader('x-request-id', requestId);

    // 200 even when degraded: reads and routing still work, and a restart would not give the disk room.
    // `/health` as well: vLLM, SGLang and llama-server serve it, and tools such as guidellm probe it first.
    if (path === '/healthz' || path === '/health') return sendJson(res, 200, this.settings.health?.() ?? { status: 'ok' });
    const key = authenticate(this.keys, req.headers.authorization);
    if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, this.modelList(key));
    if (req.method === 'GET' && path.startsWith(MODEL_PREFIX)) return sendJson(res, 200, this.modelEntry(key, path.slice(MODEL_PREFIX.length)));
    if (!ENDPOINTS.has(path)) throw new DomainError('no_route', `no route ${clip(req.method ?? '')} ${clip(path)}${routeHint(path)}`);
    if (req.method !== 'POST') throw new DomainError('method_not_allowed', `${path} takes POST`);

    // The key's limits come before any work that grows with the request (reading and
    // parsing the body, resolving the model), so a client over its limits costs little.
    const release = admitLimits(this.keys, key);
    let request;
    let band;
    try {
      band = bandOf(key, req.headers[PRIORITY_HEADER]);
      request = parseRequest(path, await readBody(req, this.settings.maxBodyBytes), this.ctl.catalogView);
      checkModel(key, request.adapter ?? request.model.name);
      if (path === RESPONSES && !servesResponses(request.model)) refuseUntranslatable(request.body);
    } catch (err) {
      release();
      throw err;
    }
    const model = request.model.name;
    this.traffic.requestStarted(model, Date.now());
    try {
      const signal = new ClientLeft();
      const ex: Exchange = { ...request, key, t0, signal };
      res.on('close', () => {
        if (!res.writableFinished) signal.leave();
      });
      // Held here while every replica is saturated (its prompt tokens weigh its key's share); `true` at once otherwise.
      const go = this.flow.admit(request.model, key.id, band, request.raw.length / BYTES_PER_TOKEN, signal);
      if (go !== true && !(await go)) {
        this.metrics.cancelled.inc({ model });
        return;
      }
      await this.fallbacks.forward(res, ex);
    } finally {
      release();
      this.traffic.requestEnded(model);
      this.flow.freed(model);
    }
  }

  private modelList(key: StoredKey): { object: 'list'; data: ModelEntry[] } {
    const created = Math.floor(this.ctl.startedAtMs / 1000);
    const data: ModelEntry[] = [];
    for (const m of this.ctl.models) {
      if (!mayUse(key, m.name)) continue;
      for (const id of [m.name, ...(m.aliases ?? [])]) data.push({ id, object: 'model', created, owned_by: 'llmgw' });
    }
    // LoRA adapters are models to clients, each with its base as `parent` (as vLLM lists
    // them), and a key's models may name them one by one.
    for (const m of this.ctl.models) {
      for (const a of m.adapters ?? []) if (mayUse(key, a.name)) data.push({ id: a.name, object: 'model', created, owned_by: 'llmgw', parent: m.name });
    }
    return { object: 'list', data };
  }

  /**
   * `GET /v1/models/{id}` (the SDKs' `models.retrieve`): the entry `/v1/models` lists for
   * this key, or OpenAI's 404 for a model the key may not see, so a key learns no more
   * about the catalog here than from the list.
   */
  private modelEntry(key: StoredKey, encoded: string): ModelEntry {
    let id: string;
    try {
      id = decodeURIComponent(encoded);
    } catch {
      id = encoded;
    }
    const entry = this.modelList(key).data.find((e) => e.id === id);
    if (!entry) throw new DomainError('model_not_found', `The model \`${clip(id)}\` does not exist or you do not have access to it.`, { field: 'model' });
    return entry;
  }
}

const MODEL_PREFIX = '/v1/models/';

/** One entry of `/v1/models`, in OpenAI's shape. */
interface ModelEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  /** A LoRA adapter's base model. */
  parent?: string;
}

/**
 * A hint for a path one slip away from an endpoint (`/v1/chat/completion`,
 * `/chat/completions`), so a 404 says what to send instead.
 */
export function routeHint(path: string): string {
  const p = path.replace(/\/+$/, '');
  for (const e of [...ENDPOINTS, '/v1/models']) {
    if (p === e || p === e.slice(3) || p === e.slice(0, -1) || p === `${e}s` || p === `/v1${e}`) return `; did you mean ${e}?`;
  }
  return '';
}
