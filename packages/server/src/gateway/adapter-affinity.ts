import type { RouteTarget } from '../controller/controller.js';
import type { AttemptOutcome, Balancer, Routed } from './balancer.js';

/** Adapters a replica is taken to hold when its spec does not say (`DEFAULT_MAX_LOADED_ADAPTERS`). */
const DEFAULT_SLOTS = 8;
/**
 * In-flight requests a replica holding the adapter may have beyond the least busy one
 * before another replica loads it too: a hot adapter spreads to a second replica instead
 * of queueing on one (Zipf traffic sends most requests to a few adapters).
 */
export const SPREAD_AFTER = 4;

/** What the gateway counts of adapter loads, for `llmgw_adapter_loads_total` and its unloads. */
export interface AdapterCounts {
  loaded(model: string, adapter: string): void;
  unloaded(model: string, adapter: string): void;
}

/**
 * Routing by LoRA adapter (issue 31). The gateway keeps, per replica, the adapters it has
 * sent there as an LRU of the replica's slots, which is what the engines hold: vLLM,
 * SGLang and the test engine load an adapter on its first request and evict the least
 * recently used when full. A request for an adapter goes, in this order, to a replica
 * that holds it (unless that one is `SPREAD_AFTER` busier than the least busy), to one
 * with a free slot, then to the one whose least recently used slot is the oldest; within
 * a tier the model's own balancer chooses, so cache-aware routing still works, its index
 * keyed on the adapter (`Routed.model` is the adapter's name). A prediction, like the
 * prefix index: an eviction between routing and serving costs a load in the engine,
 * never a failed request. With `prefer` false (the catalog's `adapter_routing: none`) the
 * model's balancer alone chooses, adapters ignored, and the slots are still kept and
 * counted, so the two are compared by the same count.
 */
export class AdapterAffinity implements Balancer {
  /** Per replica: adapter → the use number it was last sent at (a Map keeps them in use order). */
  private readonly held = new Map<string, Map<string, number>>();
  private uses = 0;

  constructor(
    private readonly inner: Balancer,
    /** The base model, for the counts' label. */
    private readonly model: string,
    private readonly counts: AdapterCounts,
    private readonly slotsOf: (replicaId: string) => number | undefined = () => undefined,
    /** Route by adapter (`adapter_routing: affinity`); false: only keep and count the slots. Set again on each request, so a catalog reload takes effect at once. */
    public prefer = true,
  ) {}

  pick(
    candidates: readonly RouteTarget[],
    inFlight: (replicaId: string) => number,
    eligible: (replicaId: string) => boolean,
    request?: Routed,
  ): RouteTarget | undefined {
    const adapter = request?.adapter;
    if (!adapter) return this.inner.pick(candidates, inFlight, eligible, request);
    if (!this.prefer) {
      const chosen = this.inner.pick(candidates, inFlight, eligible, request);
      if (chosen) this.use(chosen.replicaId, adapter);
      return chosen;
    }
    let least = Infinity;
    for (const t of candidates) if (eligible(t.replicaId)) least = Math.min(least, inFlight(t.replicaId));
    if (least === Infinity) return undefined;
    const holds = (id: string) => this.held.get(id)?.has(adapter) === true;
    const target =
      this.inner.pick(candidates, inFlight, (id) => eligible(id) && holds(id) && inFlight(id) < least + SPREAD_AFTER, request) ??
      this.inner.pick(candidates, inFlight, (id) => eligible(id) && (this.held.get(id)?.size ?? 0) < this.slots(id), request) ??
      this.oldestSlot(candidates, eligible);
    if (target) this.use(target.replicaId, adapter);
    return target;
  }

  firstByte(request: Routed, target: RouteTarget): void {
    this.inner.firstByte?.(request, target);
  }

  ended(request: Routed, target: RouteTarget, outcome: AttemptOutcome): void {
    this.inner.ended?.(request, target, outcome);
  }

  /** Forgets replicas that are not ready any more: a replica that comes back starts empty, as its engine does. */
  retain(ready: ReadonlySet<string>): void {
    // The model's own policy is told by the gateway itself (it is shared by every model).
    for (const id of this.held.keys()) if (!ready.has(id)) this.held.delete(id);
  }

  /** The adapters the gateway takes `replicaId` to hold, least recently used first. */
  loaded(replicaId: string): string[] {
    return [...(this.held.get(replicaId)?.keys() ?? [])];
  }

  private slots(id: string): number {
    return this.slotsOf(id) ?? DEFAULT_SLOTS;
  }

  /** The eligible replica whose least recently used adapter was used longest ago (an empty one first). */
  private oldestSlot(candidates: readonly RouteTarget[], eligible: (id: string) => boolean): RouteTarget | undefined {
    let best: RouteTarget | undefined;
    let bestUse = Infinity;
    for (const t of candidates) {
      if (!eligible(t.replicaId)) continue;
      const first = this.held.get(t.replicaId)?.values().next();
      const use = first && !first.done ? first.value : -1;
      if (use < bestUse) {
        best = t;
        bestUse = use;
      }
    }
    return best;
  }

  private use(id: string, adapter: string): void {
    let slots = this.held.get(id);
    if (!slots) this.held.set(id, (slots = new Map<string, number>()));
    if (slots.has(adapter)) slots.delete(adapter);
    else {
      this.counts.loaded(this.model, adapter);
      if (slots.size >= this.slots(id)) {
        const lru = slots.keys().next().value;
        if (lru !== undefined) {
          slots.delete(lru);
          this.counts.unloaded(this.model, lru);
        }
      }
    }
    slots.set(adapter, ++this.uses);
  }
}
