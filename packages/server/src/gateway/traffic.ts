import type { LoadSnapshot, LoadSource } from '../controller/options.js';
import type { ModelLoad } from '../reconcile/reconcile.js';

/**
 * The gateway's traffic counters: requests in flight per replica (what the balancer and
 * drains read) and per model, each model's last request, and the requests waiting for a
 * cold start (what the autoscaler reads). Made before the gateway, the controller and the
 * metrics, which each get it at construction: the gateway counts into it, the controller
 * copies it once per pass, the metrics read it at scrape time.
 */
export class Traffic implements LoadSource {
  private readonly outstanding = new Map<string, number>();
  /** The model of each replica with requests in flight, for the in-flight metric's label. */
  private readonly replicaModel = new Map<string, string>();
  private readonly modelInFlight = new Map<string, number>();
  private readonly lastRequest = new Map<string, number>();
  private readonly waiting = new Map<string, number>();

  /** Requests in flight on a replica; bound once so the balancer can call it as is. */
  readonly inFlight = (replicaId: string): number => this.outstanding.get(replicaId) ?? 0;

  /** A request for `model` was admitted; `requestEnded` when it is done, whatever the outcome. */
  requestStarted(model: string, nowMs: number): void {
    this.lastRequest.set(model, nowMs);
    this.modelInFlight.set(model, (this.modelInFlight.get(model) ?? 0) + 1);
  }

  requestEnded(model: string): void {
    this.modelInFlight.set(model, (this.modelInFlight.get(model) ?? 1) - 1);
  }

  /** An attempt on one replica began; `attemptEnded` when it is over. */
  attemptStarted(replicaId: string, model: string): void {
    this.outstanding.set(replicaId, this.inFlight(replicaId) + 1);
    this.replicaModel.set(replicaId, model);
  }

  attemptEnded(replicaId: string): void {
    const left = this.inFlight(replicaId) - 1;
    // Forget replicas with nothing in flight so the map and the metric do not grow forever.
    if (left > 0) this.outstanding.set(replicaId, left);
    else this.outstanding.delete(replicaId);
  }

  /** A request began waiting for the first replica of `model`; `waitEnded` when it stops. */
  waitStarted(model: string): void {
    this.waiting.set(model, (this.waiting.get(model) ?? 0) + 1);
  }

  waitEnded(model: string): void {
    this.waiting.set(model, (this.waiting.get(model) ?? 1) - 1);
  }

  /** Requests waiting for a first replica of `model`. */
  waitingFor(model: string): number {
    return this.waiting.get(model) ?? 0;
  }

  /** Forgets the metric labels of replicas that no longer exist and have nothing in flight. */
  prune(ids: ReadonlySet<string>): void {
    for (const id of [...this.replicaModel.keys()]) if (!ids.has(id) && !this.outstanding.has(id)) this.replicaModel.delete(id);
  }

  /** What the autoscaler reads: in-flight requests, the last request, and cold-start waiters. */
  load(model: string): ModelLoad {
    const last = this.lastRequest.get(model);
    return { inFlight: this.modelInFlight.get(model) ?? 0, waiting: this.waitingFor(model), ...(last !== undefined ? { lastRequestMs: last } : {}) };
  }

  /** A copy of the counters for one reconcile pass, so the controller holds no live view of them. */
  loadSnapshot(): LoadSnapshot {
    const models = new Map<string, ModelLoad>();
    for (const m of new Set([...this.modelInFlight.keys(), ...this.waiting.keys(), ...this.lastRequest.keys()])) models.set(m, this.load(m));
    return { inFlight: new Map(this.outstanding), models };
  }

  /** In-flight requests per replica with its model, read by the metric at scrape time. */
  inFlightByReplica(): { replica: string; model: string; value: number }[] {
    return [...this.outstanding].map(([replica, value]) => ({ replica, value, model: this.replicaModel.get(replica) ?? '' }));
  }
}
