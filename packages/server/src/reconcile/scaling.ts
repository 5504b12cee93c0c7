import { ACTIVE_REPLICA_STATES, type Replica } from '../domain.js';
import type { Model } from '@llmgw/shared';
import type { PlannedReplica } from './actions.js';
import { NO_LOAD, type ModelLoad } from './input.js';
import type { Plan } from './plan.js';
import { placeReplica } from './placement.js';

const DEFAULT_TARGET_IN_FLIGHT = 4;
const DEFAULT_SCALE_DOWN_DELAY_S = 300;
const DEFAULT_IDLE_TIMEOUT_S = 600;

/**
 * Step 5: each model between its min and max, following its in-flight load. Short
 * models get replicas placed (away from nodes where they just failed); models with too
 * many step down what serves least, once the load has stayed low for the window.
 */
export function scaling(plan: Plan): void {
  const { nowMs } = plan;
  for (const model of plan.input.models) {
    const scaling = model.scaling ?? { min: 1, max: 1 };
    const min = scaling.min;
    const { want, load, idleTimeoutS } = wanted(plan, model);
    const revision = plan.input.revisions?.get(model.name);
    const mine = plan.live().filter((r) => r.model === model.name);
    const all: (Replica | PlannedReplica)[] = [...mine, ...plan.creations().filter((r) => r.model === model.name)];
    // A replacement does not add capacity until the replica it replaces steps down, and a
    // failed replica keeps its slot during its backoff so a crash loop is not a
    // creation loop.
    const active = new Set(mine.filter((r) => ACTIVE_REPLICA_STATES.has(r.state)).map((r) => r.id));
    const counted = all.filter((r) => (ACTIVE_REPLICA_STATES.has(r.state) || r.state === 'failed') && !(r.replaces && active.has(r.replaces)));
    plan.desired.set(model.name, want);

    if (want > counted.length) {
      plan.lowSince.delete(model.name);
      if (plan.input.defer?.has(model.name)) continue;
      const avoid = [...mine.filter((r) => r.state === 'failed').flatMap((r) => r.shards.map((s) => s.nodeId)), ...(plan.failedOn.get(model.name) ?? [])];
      for (let have = counted.length; have < want; have++) {
        const outcome = placeReplica(plan, model, avoid, { code: 'scale-up', reason: `${model.name} has ${have} of ${want} replicas` });
        if (!outcome.placement) break;
      }
    } else if (want < counted.length) {
      const since = plan.lowSince.get(model.name) ?? nowMs;
      plan.lowSince.set(model.name, since);
      // Going to zero after the idle timeout needs no second window.
      const delayMs = want === 0 && min === 0 ? 0 : (scaling.scale_down_delay_s ?? DEFAULT_SCALE_DOWN_DELAY_S) * 1000;
      if (nowMs - since < delayMs) continue;
      // Step down what serves least: not yet ready first, then an outdated revision (a
      // rollout would replace it anyway), then the newest. Only replicas that exist can be
      // victims (a replacement planned this pass is never counted).
      const current = (r: Replica) => Number(revision === undefined || (r.revision ?? revision) === revision);
      const victims = counted
        .filter((r): r is Replica => 'id' in r && ACTIVE_REPLICA_STATES.has(r.state))
        .sort((a, b) => Number(a.state === 'ready') - Number(b.state === 'ready') || current(a) - current(b) || b.createdAtMs - a.createdAtMs)
        .slice(0, counted.length - want);
      const code = want === 0 ? 'idle' : 'scaled-down';
      const reason = want === 0 ? `idle for ${idleTimeoutS}s (min 0)` : `scaled down to ${want} (in flight ${load.inFlight})`;
      for (const v of victims) {
        if (v.state === 'ready') plan.stepDown(v, code, reason);
        else plan.remove(v, code, reason);
      }
      plan.lowSince.delete(model.name);
    } else {
      plan.lowSince.delete(model.name);
    }
  }
}

/**
 * The replicas `model` should have now: between its min and max, following its in-flight
 * load, one for a `min: 0` model while requests wait or came within its idle timeout.
 * Scaling aims for it; a rollout keeps at least it minus `max_unavailable` serving.
 */
export function wanted(plan: Plan, model: Model): { want: number; load: ModelLoad; idleTimeoutS: number } {
  const scaling = model.scaling ?? { min: 1, max: 1 };
  const min = scaling.min;
  const max = Math.max(scaling.max, min);
  const load = plan.input.load.get(model.name) ?? NO_LOAD;
  const byLoad = Math.ceil(load.inFlight / (scaling.target_in_flight ?? DEFAULT_TARGET_IN_FLIGHT));
  const idleTimeoutS = scaling.idle_timeout_s ?? DEFAULT_IDLE_TIMEOUT_S;
  const idle = load.lastRequestMs === undefined || plan.nowMs - load.lastRequestMs >= idleTimeoutS * 1000;
  const floor = min > 0 ? min : load.waiting > 0 || !idle ? 1 : 0;
  return { want: Math.min(Math.max(byLoad, floor), max), load, idleTimeoutS };
}
