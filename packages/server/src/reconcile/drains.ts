import { ACTIVE_REPLICA_STATES, type Replica } from '../domain.js';
import type { Plan } from './plan.js';
import { placeReplica } from './placement.js';

/**
 * Step 4a: a replica that stopped taking traffic is removed once its requests finish,
 * or at the drain timeout.
 */
export function drainsFinished(plan: Plan): void {
  const { nowMs } = plan;
  const { policy, inFlight } = plan.input;
  for (const r of plan.live()) {
    if (r.state !== 'draining') continue;
    const waited = nowMs - (r.drainStartedMs ?? nowMs);
    if ((inFlight.get(r.id) ?? 0) === 0 || waited >= policy.drainTimeoutMs) plan.remove(r, 'drained', r.drainReason ?? 'drained');
  }
}

/**
 * Step 4b: replicas on a draining node. Start the replacement first, wait for it to be
 * ready and healthy a while, then stop sending the old one traffic (it leaves through
 * `drainsFinished`). `--force`, a passed deadline, or a replica not serving yet skip the
 * wait. At most `drainParallel` replacements of a model start at once; one that finds
 * no room says why on the replica it would replace (`drainBlocked`).
 */
export function drains(plan: Plan): void {
  const { nowMs } = plan;
  const { policy } = plan.input;
  for (const r of plan.live()) {
    if (!ACTIVE_REPLICA_STATES.has(r.state)) continue;
    const draining = r.shards.map((s) => plan.nodes.get(s.nodeId)).find((n) => n?.admin === 'draining');
    if (!draining) {
      // Uncordoned (or cordoned) since: what the drain found no longer holds; a new drain starts afresh.
      if (r.drainFailures || r.drainBlocked)
        plan.update(r, 'drain-unblocked', 'its node is no longer draining', (u) => {
          delete u.drainFailures;
          delete u.drainBlocked;
        });
      continue;
    }
    if (draining.drainForce) {
      plan.remove(r, 'drain-forced', `node ${draining.id} drained with --force`);
      continue;
    }
    if (draining.drainDeadlineMs !== undefined && nowMs >= draining.drainDeadlineMs) {
      plan.remove(r, 'drain-deadline', `node ${draining.id}: drain deadline passed`);
      continue;
    }
    if (r.state !== 'ready') {
      plan.remove(r, 'drain-not-serving', `node ${draining.id} is draining and the replica was not serving yet`);
      continue;
    }
    const model = plan.models.get(r.model);
    if (!model) continue;
    const replacement = plan.live().find((x) => x.replaces === r.id && ACTIVE_REPLICA_STATES.has(x.state));
    if (replacement) {
      if (plan.healthy(replacement)) plan.stepDown(r, 'traffic-moved', `node ${draining.id} drained; traffic moved to ${replacement.id}`);
      else if (r.drainBlocked) plan.update(r, 'drain-unblocked', `replacement ${replacement.id} is starting`, (u) => delete u.drainBlocked);
      continue;
    }
    const failed = plan.live().find((x) => x.replaces === r.id && x.state === 'failed');
    if (failed) {
      replacementFailed(plan, r, failed);
      continue;
    }
    if ((r.drainFailures?.count ?? 0) >= DRAIN_SAME_FAILURES) continue;
    const inProgress = [...plan.live(), ...plan.creations()].filter(
      (x) => x.model === r.model && x.replaces && x.state !== 'ready' && ACTIVE_REPLICA_STATES.has(x.state),
    ).length;
    if (inProgress >= policy.drainParallel) continue;
    const outcome = placeReplica(plan, model, [draining.id], {
      code: 'drain-replacement',
      reason: `replaces ${r.id} on draining node ${draining.id}`,
      replaces: r.id,
    });
    if (outcome.placement) {
      if (r.drainBlocked) plan.update(r, 'drain-unblocked', 'its replacement is placed', (u) => delete u.drainBlocked);
    } else if (r.drainBlocked !== outcome.summary) {
      plan.update(r, 'drain-blocked', outcome.summary, (u) => (u.drainBlocked = outcome.summary));
    }
  }
}

/** Replacements failing in a row with one error after which a drain stops placing more. */
export const DRAIN_SAME_FAILURES = 2;

/**
 * A replacement of `r` failed. It keeps its slot for the failure backoff (`failures`), and
 * no second one is placed beside it; the drain's status names its error, so the operator
 * sees the cause (`EACCES … tiny.gguf`) where they watch the drain. Failures with one
 * error are counted: at `DRAIN_SAME_FAILURES` the drain stops trying, because the next
 * would fail the same way, and says what to do.
 */
function replacementFailed(plan: Plan, r: Replica, failed: Replica): void {
  const error = failed.error ?? 'unknown error';
  const seen = r.drainFailures;
  // Count each failed replacement once: it stays `failed` over many passes.
  const counted = r.drainBlocked?.includes(failed.id) ?? false;
  const count = counted ? (seen?.count ?? 1) : seen?.error === error ? seen.count + 1 : 1;
  const why =
    count >= DRAIN_SAME_FAILURES
      ? `${count} replacements failed the same way, the last ${failed.id}: ${error}; fix that, then uncordon the node and drain it again to retry (or drain with --force)`
      : `replacement ${failed.id} failed: ${error}`;
  if (r.drainBlocked === why && seen?.count === count) return;
  plan.update(r, 'drain-blocked', why, (u) => {
    u.drainBlocked = why;
    u.drainFailures = { error, count };
  });
}
