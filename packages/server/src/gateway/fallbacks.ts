import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { DEFAULT_ROUTING, type Model, type RoutingPolicy } from '@llmgw/shared';
import type { Replica } from '../domain.js';
import { DomainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { AttemptOutcome, Balancer, Routed } from './balancer.js';
import type { ColdStart } from './cold-start.js';
import type { GatewayController } from './controller-view.js';
import { errorEvent } from './errors.js';
import { servesAdapter } from './engine-adapters.js';
import { bodyFor, RESPONSES } from './request.js';
import { end } from './sse.js';
import { RetryableUpstreamError, type Exchange, type Upstream } from './upstream.js';
import type { UsageMeter } from './usage.js';

/**
 * Serves an admitted request from the model it names, then from its fallbacks in order:
 * for each model, a cold start when it is scaled to zero, then attempts on its ready
 * replicas as the balancer picks them, each failed one cooled down, until one answers.
 * When none can, the client gets one 503 that says why for every model and replica.
 */
export class Fallbacks {
  constructor(
    private readonly ctl: GatewayController,
    private readonly upstream: Upstream,
    private readonly balancers: (model: Model) => Balancer,
    private readonly coldStart: ColdStart,
    private readonly usage: UsageMeter,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    /** Told when a stream's prefill ended on a replica of the model the client asked for: flow control may let a waiting request go. */
    private readonly freed: (requested: string) => void = () => {},
  ) {}

  async forward(res: ServerResponse, ex: Exchange): Promise<void> {
    const chain = [ex.model.name, ...(ex.model.fallbacks ?? [])];
    const failures: string[] = [];
    let overheadObserved = false;
    for (const modelName of chain) {
      const model = modelName === ex.model.name ? ex.model : this.ctl.catalogView.resolve(modelName);
      if (!model) continue;
      let targets = this.ctl.routes(model.name);
      // Why a cold start gave up, when one was tried; else the replicas' state says it.
      let why = '';
      if (targets.length === 0 && this.coldStart.needed(model)) {
        if (ex.stream && !res.headersSent) this.coldStart.openStream(res, model.name);
        why = await this.coldStart.wait(model, res, ex.stream, ex.signal);
        if (ex.signal.aborted) return;
        targets = this.ctl.routes(model.name);
      }
      if (targets.length === 0) {
        failures.push(`${model.name}: ${why || notReadyReason(this.ctl, model.name)}`);
        continue;
      }
      // An adapter's requests are routed (and their prefixes indexed) under the adapter's name on its base.
      const adapter = model === ex.model ? ex.adapter : undefined;
      // Only to replicas started with the adapter: one of an earlier revision may lack it.
      if (adapter !== undefined) {
        const serving = targets.filter((t) => servesAdapter(t, adapter));
        if (serving.length === 0) {
          failures.push(`${model.name}: no ready replica was started with adapter ${adapter} (a rollout adding it is not done)`);
          continue;
        }
        targets = serving;
      }
      const payload = bodyFor(ex, model.name);
      const fallbackFrom = model.name !== ex.model.name ? ex.model.name : undefined;
      const tried = new Set<string>();
      let now = Date.now();
      const eligible = (id: string) => !tried.has(id) && !this.upstream.coolingDown(id, now);
      const balancer = this.balancers(model);
      const responses = ex.path === RESPONSES;
      const routed: Routed = adapter ? { model: adapter, body: ex.body, adapter, responses } : { model: model.name, body: ex.body, responses };
      for (
        let target = balancer.pick(targets, this.upstream.inFlight, eligible, routed);
        target;
        target = balancer.pick(targets, this.upstream.inFlight, eligible, routed)
      ) {
        tried.add(target.replicaId);
        if (ex.signal.aborted) return;
        if (!overheadObserved) {
          this.metrics.overhead.observe(Number(process.hrtime.bigint() - ex.t0) / 1e9);
          overheadObserved = true;
        }
        let outcome: AttemptOutcome = { answered: false };
        try {
          const t = target;
          outcome = await this.upstream.attempt(
            res,
            ex,
            model,
            target,
            payload,
            fallbackFrom,
            balancer.firstByte && (() => (balancer.firstByte?.(routed, t), this.freed(ex.model.name))),
          );
          this.upstream.answered(target.replicaId);
          // A stream the client left returns, its tokens so far counted.
          if (ex.signal.aborted) this.metrics.cancelled.inc({ model: model.name });
          return;
        } catch (err) {
          if (ex.signal.aborted) {
            this.metrics.cancelled.inc({ model: model.name });
            return;
          }
          if (!(err instanceof RetryableUpstreamError)) throw err;
          failures.push(`${model.name} replica ${target.replicaId}: ${err.message}`);
          this.upstream.coolDown(target.replicaId);
          this.ctl.engineFailed(target.replicaId);
          this.metrics.retries.inc({ model: model.name });
          this.log.warn({ replica: target.replicaId, model: model.name, err: err.message }, 'upstream failed before the first byte; trying another replica');
        } finally {
          balancer.ended?.(routed, target, outcome);
        }
        now = Date.now();
      }
      // Routes but no attempt: every replica failed a moment ago and is cooling down. Say
      // so, rather than calling replicas that are `ready` in ctl "not ready".
      if (tried.size === 0)
        failures.push(`${model.name}: every ready replica (${targets.map((t) => t.replicaId).join(', ')}) failed a moment ago and is cooling down`);
    }
    this.usage.failed(ex.key, ex.model.name);
    this.metrics.countRequest(ex.model.name, ex.path, 503);
    if (res.headersSent) {
      // A cold-start stream already said 200; the failure goes in the stream.
      end(res, errorEvent(new DomainError('no_ready_replica', `no replica could serve \`${ex.model.name}\`: ${failures.join('; ')}`)));
      return;
    }
    const what = `\`${ex.model.name}\`${chain.length > 1 ? ' or its fallbacks' : ''}`;
    throw new DomainError('no_ready_replica', `no replica could serve ${what}: ${failures.join('; ')}`, { retryAfterS: 5 });
  }
}

/** A model's routing policy, its default filled in. */
export function routingOf(model: Model): RoutingPolicy {
  return model.routing ?? DEFAULT_ROUTING;
}

/** A replica's state in the words of `ctl replicas`: `unknown` while a node of it is not heard from. */
function shownState(ctl: GatewayController, r: Replica): string {
  const unheard = ctl.unheard(r);
  return unheard.length ? `unknown: node ${unheard.join(', ')} stopped reporting` : r.state;
}

/** Why a model has no replica to route to, for the 503: its replicas' states, or why it is not placed. */
function notReadyReason(ctl: GatewayController, model: string): string {
  const replicas = ctl.listReplicas().filter((x) => x.model === model);
  if (replicas.length) return `no ready replica (${replicas.map((x) => `${x.id} ${shownState(ctl, x)}`).join(', ')})`;
  const attempt = ctl.lastAttempt(model);
  if (!attempt) return 'not placed yet';
  const rs = attempt.outcome.rejections;
  const detail = rs
    .slice(0, 3)
    .map((x) => `${x.node ?? x.pool ?? x.profile}: ${x.reason}`)
    .join('; ');
  return `not placed: ${attempt.outcome.summary}${detail ? ` (${detail}${rs.length > 3 ? `; ${rs.length - 3} more in ctl explain ${model}` : ''})` : ''}`;
}
