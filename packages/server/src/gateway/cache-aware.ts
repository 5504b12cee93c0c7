import type { RouteTarget } from '../controller/controller.js';
import type { Metrics } from '../metrics.js';
import { LeastLoaded, type AttemptOutcome, type Balancer, type Routed } from './balancer.js';
import { PrefixIndex, blocksFor, DEFAULT_PREFIX_CACHE_TOKENS } from './prefix-index.js';
import { BLOCK_BYTES, BYTES_PER_TOKEN, promptBlocks, type PromptBlocks } from './prefix.js';

/**
 * A replica is *sticky* for a request when it is predicted to hold at least half of the
 * prompt: there the request pays at most half the prefill it would pay on a cold
 * replica. Below half, most of the prefill is paid anyway, and keeping such weak
 * affinity concentrates load for little gain. (llm-d keeps 0.8, SGLang 0.3–0.5; half
 * keeps later turns of a chat sticky while their new part is still the smaller one.)
 */
export const AFFINITY_THRESHOLD = 0.5;
/**
 * Weight of a new sample in the running averages (a replica's prefill rate, a model's
 * bytes per token): 1/8, as TCP's smoothed round-trip time (RFC 6298), about the last
 * eight responses.
 */
export const SAMPLE_WEIGHT = 1 / 8;

/** Why a cache-aware decision went where it did (`llmgw_routing_decisions_total{decision}`). */
export type Decision = 'kept' | 'broke_saturated' | 'broke_unavailable' | 'no_affinity';

/** What the policy keeps of a request between its pick and the attempt's end. */
interface State {
  blocks: PromptBlocks;
  /** The pick being attempted. */
  replica?: string;
  /** Blocks predicted cached on it. */
  matched: number;
  /** Uncached tokens charged to its in-flight count; 0 once released. */
  charged: number;
  /** It had no uncached tokens in flight ahead of this one: its time to first byte is its prefill alone. */
  alone: boolean;
  sentNs: bigint;
  firstByteNs?: bigint;
}

/**
 * Cache-aware routing (README.md, "Cache-aware routing"). Candidates are the eligible
 * replicas predicted to hold at least {@link AFFINITY_THRESHOLD} of the prompt; among
 * them, the one with the fewest uncached prompt tokens in flight once this request is
 * added. Affinity is dropped only when the request would get its first token sooner on
 * the best other replica even paying its uncached prefill there, by more than a budget
 * of one whole cold prefill of the prompt (what seeding a second copy of the prefix
 * costs): a cost of the request itself, not a tuned constant. Waits are
 * in-flight uncached tokens ÷ the replica's prefill rate, measured from its own
 * responses. With no sticky replica (or no routing text: embeddings) it is least-loaded.
 */
export class CacheAware implements Balancer {
  private readonly index = new PrefixIndex();
  private readonly leastLoaded: LeastLoaded;
  /** Uncached prompt tokens sent to each replica whose prefill has not ended. */
  private readonly uncached = new Map<string, number>();
  /** Each replica's prefill rate, tokens/s, from its own responses. */
  private readonly rates = new Map<string, number>();
  /** What each replica's engine said its prefix cache holds, in tokens. */
  private readonly capacities = new Map<string, number>();
  /** Bytes of routing text per engine token, per model, from the engines' prompt_tokens. */
  private readonly bytesPerToken = new Map<string, number>();

  constructor(
    private readonly settings: { prefixCacheTokens?: number } = {},
    private readonly metrics?: Metrics,
    private readonly random: () => number = Math.random,
  ) {
    this.leastLoaded = new LeastLoaded(random);
  }

  pick(
    candidates: readonly RouteTarget[],
    inFlight: (replicaId: string) => number,
    eligible: (replicaId: string) => boolean,
    request?: Routed,
  ): RouteTarget | undefined {
    if (!request) return this.leastLoaded.pick(candidates, inFlight, eligible);
    let st = request.state as State | undefined;
    if (!st) request.state = st = { blocks: promptBlocks(request.body, request.responses), matched: 0, charged: 0, alone: false, sentNs: 0n };
    const { hashes } = st.blocks;
    const n = hashes.length;
    if (n === 0) {
      const t = this.leastLoaded.pick(candidates, inFlight, eligible);
      if (t) this.remember(st, t, 0, 0);
      return t;
    }
    const model = request.model;
    const promptTokens = st.blocks.bytes / this.bpt(model);
    const fallbackRate = this.meanRate(candidates);

    let sticky: RouteTarget | undefined;
    let stickyLoad = Infinity;
    let stickyMatched = 0;
    let stickyTies = 0;
    let other: RouteTarget | undefined;
    let otherWait = Infinity;
    let otherMatched = 0;
    let unavailable = false;
    for (const t of candidates) {
      const id = t.replicaId;
      const m = this.index.peek(model, id)?.matched(hashes) ?? 0;
      const isSticky = m / n >= AFFINITY_THRESHOLD;
      if (!eligible(id)) {
        unavailable ||= isSticky;
        continue;
      }
      const queued = this.uncached.get(id) ?? 0;
      if (isSticky) {
        const load = queued + promptTokens * (1 - m / n);
        // Ties (idle replicas with the same prefix) are spread at random, as in LeastLoaded.
        if (load < stickyLoad || (load === stickyLoad && this.random() * ++stickyTies < 1)) {
          if (load < stickyLoad) stickyTies = 1;
          sticky = t;
          stickyLoad = load;
          stickyMatched = m;
        }
      } else {
        const wait = queued / (this.rates.get(id) ?? fallbackRate);
        if (wait < otherWait || (wait === otherWait && other && inFlight(id) < inFlight(other.replicaId))) {
          other = t;
          otherWait = wait;
          otherMatched = m;
        }
      }
    }
    if (!sticky) {
      const t = this.roomiest(model, candidates, inFlight, eligible, fallbackRate);
      return (
        t &&
        this.decide(model, st, t, this.index.peek(model, t.replicaId)?.matched(hashes) ?? 0, promptTokens, unavailable ? 'broke_unavailable' : 'no_affinity')
      );
    }
    if (other) {
      const rs = this.rates.get(sticky.replicaId) ?? fallbackRate;
      const ro = this.rates.get(other.replicaId) ?? fallbackRate;
      // The sticky replica's time to this request's first token, against the other's
      // with the prefill it would pay there and the budget: one whole cold prefill of
      // the prompt, what seeding a second copy of the prefix costs.
      const viaSticky = stickyLoad / rs;
      const viaOther = otherWait + (promptTokens * (1 - otherMatched / n)) / ro + promptTokens / ro;
      if (viaSticky > viaOther) return this.decide(model, st, other, otherMatched, promptTokens, 'broke_saturated');
    }
    return this.decide(model, st, sticky, stickyMatched, promptTokens, 'kept');
  }

  firstByte(request: Routed, target: RouteTarget): void {
    const st = request.state as State | undefined;
    if (!st || st.replica !== target.replicaId) return;
    st.firstByteNs ??= process.hrtime.bigint();
    this.release(st);
  }

  ended(request: Routed, target: RouteTarget, outcome: AttemptOutcome): void {
    const st = request.state as State | undefined;
    if (!st || st.replica !== target.replicaId) return;
    this.release(st);
    st.replica = undefined;
    const model = request.model;
    const id = target.replicaId;
    if (outcome.prefixCacheTokens !== undefined && outcome.prefixCacheTokens !== this.capacities.get(id)) {
      this.capacities.set(id, outcome.prefixCacheTokens);
      this.index.peek(model, id)?.setCapacity(blocksFor(outcome.prefixCacheTokens, this.bpt(model)));
    }
    const u = outcome.usage;
    const prompt = u?.prompt_tokens;
    if (!outcome.answered || !prompt || st.blocks.bytes === 0) return;
    this.bytesPerToken.set(model, average(this.bytesPerToken.get(model), st.blocks.bytes / prompt));
    const cached = u.cached_tokens;
    if (cached === undefined) return;
    const uncached = prompt - cached;
    if (st.alone && st.firstByteNs !== undefined && uncached >= BLOCK_BYTES / BYTES_PER_TOKEN) {
      const s = Number(st.firstByteNs - st.sentNs) / 1e9;
      if (s > 0) this.rates.set(id, average(this.rates.get(id), uncached / s));
    }
    // The prediction in the engine's tokens, to compare with what it reported.
    const predicted = Math.round((st.matched / st.blocks.hashes.length) * prompt);
    this.metrics?.countCachedTokens(model, id, 'predicted', predicted);
    this.metrics?.countCachedTokens(model, id, 'reported', cached);
    // Two blocks of slack: the engine's cache is counted in its own whole blocks, and the
    // index's last block is partial.
    if (cached < predicted - (2 * BLOCK_BYTES) / this.bpt(model)) {
      const cache = this.index.peek(model, id);
      cache?.decay();
      cache?.learn(st.blocks.hashes);
    }
  }

  retain(ready: ReadonlySet<string>): void {
    this.index.retain(ready);
    for (const m of [this.rates, this.capacities]) for (const id of [...m.keys()]) if (!ready.has(id)) m.delete(id);
  }

  /** Uncached prompt tokens sent to a replica whose prefill has not ended (flow control's saturation). */
  uncachedInFlight(replicaId: string): number {
    return this.uncached.get(replicaId) ?? 0;
  }

  /** A replica's measured prefill rate, tokens/s, or undefined before its first measurement. */
  prefillRate(replicaId: string): number | undefined {
    return this.rates.get(replicaId);
  }

  /** Index entries over all replicas (for the memory bound). */
  get entries(): number {
    return this.index.entries;
  }

  private decide(model: string, st: State, t: RouteTarget, matched: number, promptTokens: number, decision: Decision): RouteTarget {
    const id = t.replicaId;
    const capacity = blocksFor(this.capacities.get(id) ?? this.settings.prefixCacheTokens ?? DEFAULT_PREFIX_CACHE_TOKENS, this.bpt(model));
    // Learned now, not when the engine answers: requests with the same prefix arriving
    // meanwhile follow this one instead of each prefilling it somewhere else.
    this.index.replica(model, id, capacity).learn(st.blocks.hashes);
    this.metrics?.countRoutingDecision(model, id, decision);
    this.remember(st, t, matched, promptTokens * (1 - matched / st.blocks.hashes.length));
    return t;
  }

  /**
   * Least-loaded, ties (common: idle replicas) going to the replica whose cache is
   * emptiest, then at random: new prefixes spread over the caches instead of piling up
   * where chance put them, while load still comes first (sending misses to the emptiest
   * cache regardless of load is what made SGLang's first router spiral). Load is the
   * prefill queued ahead (uncached tokens in flight ÷ rate), then requests in flight: a
   * replica whose earlier requests are past their prefill, only decoding, starts this
   * prompt at once, while one with the same count mid-prefill makes it wait a whole
   * prefill. Under flow control that is the difference between a request let go from the
   * queue to the replica that freed and one sent behind a prefill (bench/fairness.bench.mjs).
   */
  private roomiest(
    model: string,
    candidates: readonly RouteTarget[],
    inFlight: (replicaId: string) => number,
    eligible: (replicaId: string) => boolean,
    fallbackRate: number,
  ): RouteTarget | undefined {
    let best: RouteTarget | undefined;
    let bestWait = Infinity;
    let bestLoad = Infinity;
    let bestFill = Infinity;
    let ties = 0;
    for (const t of candidates) {
      if (!eligible(t.replicaId)) continue;
      const wait = (this.uncached.get(t.replicaId) ?? 0) / (this.rates.get(t.replicaId) ?? fallbackRate);
      const load = inFlight(t.replicaId);
      const cache = this.index.peek(model, t.replicaId);
      const fill = cache ? cache.entries / cache.capacityBlocks : 0;
      if (wait < bestWait || (wait === bestWait && (load < bestLoad || (load === bestLoad && fill < bestFill)))) {
        [best, bestWait, bestLoad, bestFill, ties] = [t, wait, load, fill, 1];
      } else if (wait === bestWait && load === bestLoad && fill === bestFill && this.random() * ++ties < 1) {
        best = t;
      }
    }
    return best;
  }

  private remember(st: State, t: RouteTarget, matched: number, charged: number): void {
    const queued = this.uncached.get(t.replicaId) ?? 0;
    st.replica = t.replicaId;
    st.matched = matched;
    st.charged = charged;
    st.alone = queued === 0;
    st.sentNs = process.hrtime.bigint();
    st.firstByteNs = undefined;
    if (charged > 0) this.uncached.set(t.replicaId, queued + charged);
  }

  private release(st: State): void {
    if (!st.replica || st.charged === 0) return;
    const left = (this.uncached.get(st.replica) ?? 0) - st.charged;
    // Forget idle replicas so the map does not grow; float sums are cleaned of their dust.
    if (left > 1e-6) this.uncached.set(st.replica, left);
    else this.uncached.delete(st.replica);
    st.charged = 0;
  }

  private bpt(model: string): number {
    return this.bytesPerToken.get(model) ?? BYTES_PER_TOKEN;
  }

  /**
   * The prefill rate of a replica not measured yet: the mean of the candidates that are,
   * else 1 token/s. With no rate known anywhere every wait has the same unit, so the
   * comparison in `pick` is one of tokens, and still right.
   */
  private meanRate(candidates: readonly RouteTarget[]): number {
    let sum = 0;
    let k = 0;
    for (const t of candidates) {
      const r = this.rates.get(t.replicaId);
      if (r === undefined) continue;
      sum += r;
      k++;
    }
    return k ? sum / k : 1;
  }
}

function average(old: number | undefined, sample: number): number {
  return old === undefined ? sample : old + SAMPLE_WEIGHT * (sample - old);
}
