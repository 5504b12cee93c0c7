import type { ReconcilePolicy } from './input.js';
import type { Plan } from './plan.js';

/** However often a model fails, a failed replica is replaced at least this often. */
const MAX_FAILED_BACKOFF_MS = 10 * 60_000;

/**
 * How long a failed replica keeps its slot: the first backoff, doubled for each earlier
 * failure of its model, so a crash loop slows down instead of spinning.
 */
export function failedBackoffMs(policy: ReconcilePolicy, failuresOfModel: number | undefined): number {
  const n = Math.max(0, (failuresOfModel ?? 1) - 1);
  return Math.min(policy.failedBackoffMs * 2 ** n, MAX_FAILED_BACKOFF_MS);
}

/**
 * Step 2: failed replicas whose backoff is over are removed, and the nodes they failed
 * on are remembered so that scaling does not place the replacement straight back there.
 */
export function failures(plan: Plan): void {
  const { nowMs } = plan;
  for (const r of plan.live()) {
    if (r.state !== 'failed') continue;
    if (nowMs - r.createdAtMs < failedBackoffMs(plan.input.policy, plan.input.failures.get(r.model))) continue;
    plan.remove(r, 'failed', `replaced after failing: ${r.error ?? 'unknown error'}`);
    plan.failedOn.set(r.model, [...(plan.failedOn.get(r.model) ?? []), ...r.shards.map((s) => s.nodeId)]);
  }
}
