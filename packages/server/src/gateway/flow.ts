import { EventEmitter } from 'node:events';
import type { Model } from '@llmgw/shared';
import type { RouteTarget } from '../controller/controller.js';
import { DomainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { BANDS, DEFAULT_QUEUE_SETTINGS, FairQueue, type Band, type FairQueueSettings } from './fair-queue.js';
import { DEFAULT_SATURATION, everySaturated, pressures, retryAfterS, type LoadReader, type ReplicaPressure, type SaturationSettings } from './saturation.js';
import type { LeaveSignal } from './client-left.js';

/** What flow control reads of the gateway: a model's routes, which may be tried now, and their load. */
export interface FlowView {
  routes(model: string): readonly RouteTarget[];
  /** False for a replica cooling down. */
  readonly eligible: (replicaId: string) => boolean;
  /** How its replicas' load is read: cache-aware routing's state for a cache-aware model, requests in flight for another. */
  load(model: Model): LoadReader;
}

export interface FlowSettings {
  queue?: Partial<FairQueueSettings>;
  saturation?: Partial<SaturationSettings>;
}

/** A request held in the gateway: what settles its wait. */
interface Held {
  settle: (go: boolean) => void;
  fail: (e: DomainError) => void;
}

interface ModelQueue {
  model: Model;
  q: FairQueue<Held>;
  timer?: NodeJS.Timeout;
  /** A pump is scheduled (setImmediate) for this model. */
  pumping: boolean;
}

/**
 * Hold, don't push (DESIGN.md §16, README.md "Flow control"): a request for a model whose
 * every eligible replica is saturated waits here, in the model's `FairQueue`, instead of
 * in an engine's queue, and is let go as capacity frees (`freed`: a request's prefill
 * ended or it finished; `freedAll`: the replicas changed). A request that waits past the
 * TTL, or finds its band full, is refused with 429 and `Retry-After`; one whose client
 * leaves goes at once. Below saturation, with nothing waiting, `admit` answers `true`
 * synchronously: no promise, no allocation, no wait.
 */
export class FlowControl {
  private readonly queues = new Map<string, ModelQueue>();
  private readonly queueSettings: FairQueueSettings;
  private readonly saturation: SaturationSettings;
  /** `queued` (model) when a request starts waiting, `left` (model) when one stops: for tests and metrics. */
  readonly events = new EventEmitter();

  constructor(
    private readonly view: FlowView,
    settings: FlowSettings = {},
    private readonly now: () => number = Date.now,
    private readonly metrics?: Metrics,
  ) {
    this.queueSettings = { ...DEFAULT_QUEUE_SETTINGS, ...settings.queue };
    this.saturation = { ...DEFAULT_SATURATION, ...settings.saturation };
  }

  /**
   * Whether the request may be forwarded now (`true`), or a promise of it: true when it
   * leaves the queue for a replica, false when its client left while it waited. Rejects
   * with a 429 (`rate_limited`) when its band is full or its TTL passes.
   * @param cost its estimated prompt tokens, its weight in the key's round-robin share
   */
  admit(model: Model, key: string, band: Band, cost: number, signal: LeaveSignal): true | Promise<boolean> {
    const mq = this.queues.get(model.name);
    // Nothing waiting ahead of it and room somewhere: forward, as without flow control.
    if ((!mq || mq.q.size() === 0) && !this.mustHold(model)) return true;
    return this.hold(mq ?? this.queueOf(model), key, band, cost, signal);
  }

  /** Capacity of `model`'s replicas may have freed (a prefill ended, a request finished): let waiting requests go. */
  freed(model: string): void {
    const mq = this.queues.get(model);
    if (mq && mq.q.size() > 0) this.pump(mq);
  }

  /** The replicas changed (one became ready, or none is left): every model's waiting requests are looked at again. */
  freedAll(): void {
    for (const mq of this.queues.values()) if (mq.q.size() > 0) this.pump(mq);
  }

  /** Requests waiting for a model, in one band or all. */
  waiting(model: string, band?: Band): number {
    return this.queues.get(model)?.q.size(band) ?? 0;
  }

  /** Requests waiting per model and band, for `llmgw_queued_requests` at scrape time. */
  depths(): { model: string; band: Band; value: number }[] {
    const out: { model: string; band: Band; value: number }[] = [];
    for (const [model, mq] of this.queues) for (const band of BANDS) out.push({ model, band, value: mq.q.size(band) });
    return out;
  }

  /** Refuses everything still waiting (the gateway is closing). */
  close(): void {
    for (const [model, mq] of this.queues) {
      clearTimeout(mq.timer);
      for (let w = mq.q.next(); w; w = mq.q.next())
        w.item.fail(new DomainError('no_ready_replica', `the gateway is shutting down; \`${model}\` was not served`, { retryAfterS: 1 }));
    }
  }

  private queueOf(model: Model): ModelQueue {
    const mq: ModelQueue = { model, q: new FairQueue<Held>(this.queueSettings), pumping: false };
    this.queues.set(model.name, mq);
    return mq;
  }

  /** The model's eligible replicas' load, for a Retry-After (off the hot path). */
  private pressures(model: Model): ReplicaPressure[] {
    const ids: string[] = [];
    for (const t of this.view.routes(model.name)) if (this.view.eligible(t.replicaId)) ids.push(t.replicaId);
    const l = this.view.load(model);
    return pressures(
      ids,
      (id) => l.uncached(id),
      (id) => l.rate(id),
      (id) => l.inFlight(id),
    );
  }

  /** Every eligible replica saturated; false when none may be tried (then nothing is held: the cold start or the 503 answers). */
  private mustHold(model: Model): boolean {
    return everySaturated(this.view.routes(model.name), this.view.eligible, this.view.load(model), this.saturation);
  }

  private hold(mq: ModelQueue, key: string, band: Band, cost: number, signal: LeaveSignal): Promise<boolean> {
    const model = mq.model.name;
    // The client left while its body was read: nothing to hold.
    if (signal.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve, reject) => {
      const held: Held = {
        settle: (go) => {
          signal.removeEventListener('abort', onAbort);
          resolve(go);
        },
        fail: (e) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      const r = mq.q.enqueue(held, key, band, cost, this.now());
      if (!r.ok) {
        const retry = retryAfterS(mq.q.tokensAhead(band), this.pressures(mq.model));
        this.metrics?.queueRefusals.inc({ model, reason: 'queue_full' });
        reject(
          new DomainError(
            'rate_limited',
            `queue_full: every replica of \`${model}\` is saturated and ${mq.q.size(band)} requests of priority ${band} already wait; retry after ${retry} s`,
            { retryAfterS: retry, reason: 'queue_full' },
          ),
        );
        return;
      }
      const w = r.waiting;
      const onAbort = () => {
        if (mq.q.remove(w)) this.left(mq);
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.events.emit('queued', model);
      this.arm(mq);
      // Something may have freed since the check (or the queue was not empty but there is room).
      this.pump(mq);
    });
  }

  /** Lets the next request go while a replica has room; one per turn of the event loop, so the one let go is charged to its replica before the next check. */
  private pump(mq: ModelQueue): void {
    if (mq.pumping) return;
    mq.pumping = true;
    setImmediate(() => {
      mq.pumping = false;
      if (mq.q.size() === 0 || this.mustHold(mq.model)) return;
      const w = mq.q.next()!;
      this.metrics?.queueWait.observe({ model: mq.model.name, band: w.band }, (this.now() - w.enqueuedMs) / 1000);
      this.left(mq);
      w.item.settle(true);
      if (mq.q.size() > 0) this.pump(mq);
    });
  }

  /** One timer per model, at the earliest deadline of what waits. */
  private arm(mq: ModelQueue): void {
    clearTimeout(mq.timer);
    const at = mq.q.nextDeadline();
    if (at === undefined) return;
    mq.timer = setTimeout(() => this.expire(mq), Math.max(0, at - this.now()));
    mq.timer.unref();
  }

  private expire(mq: ModelQueue): void {
    const model = mq.model.name;
    const expired = mq.q.expire(this.now());
    const ps = this.pressures(mq.model);
    for (const w of expired) {
      const retry = retryAfterS(mq.q.tokensAhead(w.band) + w.cost, ps);
      this.metrics?.queueRefusals.inc({ model, reason: 'queue_timeout' });
      w.item.fail(
        new DomainError(
          'rate_limited',
          `queue_timeout: every replica of \`${model}\` stayed saturated for the ${this.queueSettings.ttlMs / 1000} s a request may wait; retry after ${retry} s`,
          { retryAfterS: retry, reason: 'queue_timeout' },
        ),
      );
      this.events.emit('left', model);
    }
    this.arm(mq);
  }

  private left(mq: ModelQueue): void {
    this.events.emit('left', mq.model.name);
    if (mq.q.size() === 0) {
      clearTimeout(mq.timer);
      mq.timer = undefined;
    }
  }
}
