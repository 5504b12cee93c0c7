import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LIMIT_REASONS } from '@llmgw/shared';
import { BucketHistogram } from './bucket-histogram.js';

/** What the gauges read at scrape time, given at construction (absent: nothing in flight, the store up). */
export interface MetricSources {
  /** Requests in flight per replica (`Traffic.inFlightByReplica`). */
  inFlight?: () => { model: string; replica: string; value: number }[];
  /** The store's state (`GuardedStore.stats`). */
  store?: () => { up: boolean; errors: ReadonlyMap<string, number> };
  /** Requests waiting in the gateway per model and band (`Gateway.queued`). */
  queued?: () => { model: string; band: string; value: number }[];
  /** Each routed replica's saturation as flow control judges it (`Gateway.saturation`). */
  saturation?: () => { model: string; replica: string; saturated: boolean; waitS?: number }[];
}

/**
 * Prometheus metrics, served on the admin listener at /metrics. Labels stay low in
 * cardinality: model and status class, never key or request ids (usage per key is in
 * /api/v1/usage instead).
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'llmgw_requests_total',
    help: 'Client requests by model, endpoint and status code',
    labelNames: ['model', 'endpoint', 'status'] as const,
    registers: [this.registry],
  });
  // The three histograms every request observes: BucketHistogram, which renders as
  // prom-client's Histogram does at a fraction of its cost per observation.
  readonly duration = new BucketHistogram(
    'llmgw_request_duration_seconds',
    'Time from request to the last byte of the response',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    'model',
    this.registry,
  );
  readonly ttft = new BucketHistogram(
    'llmgw_time_to_first_token_seconds',
    'Time from request to the first streamed byte from the engine',
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    'model',
    this.registry,
  );
  readonly overhead = new BucketHistogram(
    'llmgw_gateway_overhead_seconds',
    "The gateway's own time per request before it reaches the engine (auth, limits, routing, body handling)",
    [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01],
    undefined,
    this.registry,
  );
  /** Read at scrape time rather than updated per request: the hot path stays free of label lookups. */
  readonly inFlight = new Gauge({
    name: 'llmgw_replica_in_flight_requests',
    help: 'Requests in flight per replica',
    labelNames: ['model', 'replica'] as const,
    registers: [this.registry],
    collect: () => {
      this.inFlight.reset();
      for (const x of this.sources.inFlight?.() ?? []) this.inFlight.set({ model: x.model, replica: x.replica }, x.value);
    },
  });
  readonly queued = new Gauge({
    name: 'llmgw_queued_requests',
    help: 'Requests waiting in the gateway because every replica of their model is saturated, per model and priority band',
    labelNames: ['model', 'band'] as const,
    registers: [this.registry],
    collect: () => {
      this.queued.reset();
      for (const x of this.sources.queued?.() ?? []) this.queued.set({ model: x.model, band: x.band }, x.value);
    },
  });
  readonly saturated = new Gauge({
    name: 'llmgw_replica_saturated',
    help: "1 while a replica is saturated (its estimated queue wait over the bound, or its requests in flight at the bound for an engine without usage): with every replica of a model at 1, the model's requests wait in the gateway",
    labelNames: ['model', 'replica'] as const,
    registers: [this.registry],
    collect: () => this.collectSaturation(),
  });
  readonly estimatedWait = new Gauge({
    name: 'llmgw_replica_estimated_queue_wait_seconds',
    help: "A replica's estimated queue wait: uncached prompt tokens in flight over its measured prefill rate (absent for an engine that reports no usage)",
    labelNames: ['model', 'replica'] as const,
    registers: [this.registry],
  });
  readonly queueWait = new Histogram({
    name: 'llmgw_queue_wait_seconds',
    help: 'Time a request waited in the gateway before it was sent to a replica (only requests that waited)',
    labelNames: ['model', 'band'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly queueRefusals = new Counter({
    name: 'llmgw_queue_refusals_total',
    help: 'Requests answered 429 by flow control, by model and reason (queue_full, queue_timeout)',
    labelNames: ['model', 'reason'] as const,
    registers: [this.registry],
  });
  /** Every 429 of the gateway, by why: each reason's series exists from the start, at 0. */
  readonly rateLimited = new Counter({
    name: 'llmgw_rate_limited_total',
    help: "Requests answered 429, by reason: a key's rpm, tpm or concurrency limit, or flow control's queue_timeout or queue_full",
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly fallbacks = new Counter({
    name: 'llmgw_fallbacks_total',
    help: 'Requests served by a fallback model',
    labelNames: ['model', 'fallback'] as const,
    registers: [this.registry],
  });
  /** LoRA adapters the gateway sent to a replica that did not hold them (issue 31): a load in the engine. */
  readonly adapterLoads = new Counter({
    name: 'llmgw_adapter_loads_total',
    help: 'LoRA adapter loads: requests routed to a replica that did not hold the adapter (by the gateway\u2019s record of each replica\u2019s slots)',
    labelNames: ['model', 'adapter'] as const,
    registers: [this.registry],
  });
  readonly adapterUnloads = new Counter({
    name: 'llmgw_adapter_unloads_total',
    help: 'LoRA adapters evicted from a full replica to load another (least recently used first)',
    labelNames: ['model', 'adapter'] as const,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'llmgw_retries_total',
    help: 'Upstream attempts retried on another replica before the first byte',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'llmgw_tokens_total',
    help: 'Tokens by model and direction (prompt or completion), from the engines\u2019 usage',
    labelNames: ['model', 'direction'] as const,
    registers: [this.registry],
  });
  readonly cancelled = new Counter({
    name: 'llmgw_client_disconnects_total',
    help: 'Requests whose client left before the response ended; the upstream request was aborted',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  // The routing counters are counted on every request's way to its engine: as plain
  // numbers, added to prom-client's counters when /metrics is scraped (`collect`), since
  // a labelled inc() costs several µs there (it hashes its labels each time).
  private readonly pendingDecisions = new Map<string, { labels: [string, string, string]; n: number }>();
  private readonly pendingCachedTokens = new Map<string, { labels: [string, string, string]; n: number }>();

  readonly routingDecisions: Counter<'model' | 'replica' | 'decision'> = new Counter({
    name: 'llmgw_routing_decisions_total',
    help: 'Cache-aware routing decisions per replica chosen: kept (a replica holding the prompt), broke_saturated (the load valve: sooner elsewhere despite the prefill), broke_unavailable (the replica holding it is cooling down or failed this request), no_affinity (no replica holds half the prompt)',
    labelNames: ['model', 'replica', 'decision'] as const,
    registers: [this.registry],
    collect: () => flush(this.pendingDecisions, this.routingDecisions),
  });
  readonly routingCachedTokens: Counter<'model' | 'replica' | 'source'> = new Counter({
    name: 'llmgw_routing_cached_tokens_total',
    help: 'Prompt tokens served from the prefix cache per replica: predicted by the gateway\u2019s index (source=predicted) and reported by the engine (source=reported), over the same responses',
    labelNames: ['model', 'replica', 'source'] as const,
    registers: [this.registry],
    collect: () => flush(this.pendingCachedTokens, this.routingCachedTokens),
  });

  readonly storeUp = new Gauge({
    name: 'llmgw_store_up',
    help: '1 while the store takes writes; 0 while it is unavailable (writes answer 503, /healthz says degraded)',
    registers: [this.registry],
    collect: () => {
      this.storeUp.set((this.sources.store?.().up ?? true) ? 1 : 0);
    },
  });
  readonly storeErrors = new Counter({
    name: 'llmgw_store_errors_total',
    help: 'Store operations that failed (full disk, read-only or corrupt file, I/O error), by operation',
    labelNames: ['op'] as const,
    registers: [this.registry],
    collect: () => {
      this.storeErrors.reset();
      for (const [op, n] of this.sources.store?.().errors ?? []) this.storeErrors.inc({ op }, n);
    },
  });
  readonly badUsage = new Counter({
    name: 'llmgw_engine_bad_usage_total',
    help: 'Engine replies whose usage was not whole numbers >= 0 (a negative, a string, 1e999); ignored, never counted as tokens',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly cancelledTokens = new Counter({
    name: 'llmgw_client_cancelled_tokens_total',
    help: 'Completion tokens relayed on streams the client left before the end; also in llmgw_tokens_total and usage',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  constructor(private readonly sources: MetricSources = {}) {
    // prom-client's names already say what they are (process_cpu_…, nodejs_heap_…): the
    // prefix only says whose, so `llmgw_process_cpu_…`, never `llmgw_process_process_cpu_…`.
    collectDefaultMetrics({ register: this.registry, prefix: 'llmgw_' });
    for (const reason of LIMIT_REASONS) this.rateLimited.inc({ reason }, 0);
  }

  /** Both saturation gauges from one reading, so a scrape sees them agree. */
  private collectSaturation(): void {
    this.saturated.reset();
    this.estimatedWait.reset();
    for (const x of this.sources.saturation?.() ?? []) {
      this.saturated.set({ model: x.model, replica: x.replica }, x.saturated ? 1 : 0);
      if (x.waitS !== undefined) this.estimatedWait.set({ model: x.model, replica: x.replica }, x.waitS);
    }
  }

  private readonly requestCounts = new Map<string, Counter.Internal>();
  private readonly tokenCounts = new Map<string, Counter.Internal>();

  countRequest(model: string, endpoint: string, status: number): void {
    counterChild(this.requestCounts, `${model}\u0000${endpoint}\u0000${status}`, () => this.requests.labels(model, endpoint, String(status))).inc();
  }

  observeDuration(model: string, seconds: number): void {
    this.duration.observe(seconds, model);
  }

  observeTtft(model: string, seconds: number): void {
    this.ttft.observe(seconds, model);
  }

  countRoutingDecision(model: string, replica: string, decision: string): void {
    pend(this.pendingDecisions, model, replica, decision, 1);
  }

  countCachedTokens(model: string, replica: string, source: 'predicted' | 'reported', n: number): void {
    pend(this.pendingCachedTokens, model, replica, source, n);
  }

  countTokens(model: string, direction: 'prompt' | 'completion', n: number): void {
    counterChild(this.tokenCounts, `${model}\u0000${direction}`, () => this.tokens.labels(model, direction)).inc(n);
  }
}

/**
 * A counter's child for one label set, looked up once and kept in `children`: prom-client
 * hashes the label object on every call otherwise, which is most of a metric's cost per request.
 */
function counterChild(children: Map<string, Counter.Internal>, key: string, make: () => Counter.Internal): Counter.Internal {
  let c = children.get(key);
  if (!c) children.set(key, (c = make()));
  return c;
}

function pend(pending: Map<string, { labels: [string, string, string]; n: number }>, a: string, b: string, c: string, n: number): void {
  const key = `${a}\u0000${b}\u0000${c}`;
  const p = pending.get(key);
  if (p) p.n += n;
  else pending.set(key, { labels: [a, b, c], n });
}

/** Adds what was counted since the last scrape to `counter`. */
function flush<L extends string>(pending: Map<string, { labels: [string, string, string]; n: number }>, counter: Counter<L>): void {
  // Zero too: a replica that reported 0 cached tokens has a series saying so.
  for (const { labels, n } of pending.values()) counter.labels(...labels).inc(n);
  pending.clear();
}
