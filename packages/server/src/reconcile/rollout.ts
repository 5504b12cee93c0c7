import { ROLLOUT_DEFAULTS, type Model, type RolloutState } from '@llmgw/shared';
import { ACTIVE_REPLICA_STATES, type Replica, type RolloutRecord } from '../domain.js';
import type { PlannedReplica } from './actions.js';
import type { Plan } from './plan.js';
import { placeReplica } from './placement.js';
import { wanted } from './scaling.js';

/** Where a model's rollout stands, as a pass or a view derives it from the replicas. */
export interface RolloutStatus {
  revision: string;
  state: RolloutState;
  /** Why it is halted, paused or waiting. */
  reason?: string;
  /** Replicas the model serves with or is starting, replacements left out. */
  replicas: number;
  /** Replicas of the current revision (pending, starting or ready). */
  updated: number;
  /** Replicas of the current revision that are ready. */
  ready: number;
  /** Replicas of an earlier revision still serving or starting. */
  outdated: number;
}

/** A rollout that changed state in a pass, for the events (`ctl events`). */
export interface RolloutChange {
  model: string;
  revision: string;
  state: RolloutState;
  reason?: string;
  /** For a new revision: what changed, in one line. */
  change?: string;
}

/** A halt a pass found: the controller stores it, so it holds until a resume or a new revision. */
export interface RolloutHalt {
  model: string;
  revision: string;
  reason: string;
}

type AnyReplica = Replica | PlannedReplica;

/** Whether `r` runs `revision`; one stored before revisions existed counts as current. */
export function isCurrent(r: { revision?: string }, revision: string): boolean {
  return (r.revision ?? revision) === revision;
}

/** Whether the stored record halts the rollout to `revision`: halted, and not resumed since. */
export function isHalted(record: RolloutRecord | undefined, revision: string): boolean {
  const h = record?.halted;
  return h !== undefined && h.revision === revision && !(record?.resumed?.revision === revision && record.resumed.atMs >= h.atMs);
}

/**
 * Where the rollout of `model` to `revision` stands, from its replicas (existing and, in
 * a pass, planned) and what is stored of it. Shared by the reconcile step and the views,
 * so `ctl rollout status` says what the reconciler acts on.
 */
export function rolloutStatus(
  model: Model,
  revision: string,
  replicas: readonly AnyReplica[],
  record: RolloutRecord | undefined,
  blocked?: string,
): RolloutStatus {
  const mine = replicas.filter((r) => r.model === model.name);
  const active = mine.filter((r) => ACTIVE_REPLICA_STATES.has(r.state));
  const activeIds = new Set(active.flatMap((r) => ('id' in r ? [r.id] : [])));
  const current = active.filter((r) => isCurrent(r, revision));
  const outdated = active.filter((r) => !isCurrent(r, revision)).length;
  const counts = {
    revision,
    replicas: active.filter((r) => !(r.replaces && activeIds.has(r.replaces))).length,
    updated: current.length,
    ready: current.filter((r) => r.state === 'ready').length,
    outdated,
  };
  if (isHalted(record, revision)) return { ...counts, state: 'halted', reason: record!.halted!.reason };
  if (outdated === 0) {
    // Like kubectl's, done only once the old replicas have left, not just stopped taking traffic.
    const leaving = mine.filter((r) => r.state === 'draining' && !isCurrent(r, revision)).length;
    if (leaving) return { ...counts, state: 'progressing', reason: `${leaving} old replica${leaving === 1 ? '' : 's'} finishing in-flight requests` };
    return counts.updated > counts.ready ? { ...counts, state: 'progressing' } : { ...counts, state: 'complete' };
  }
  if (record?.paused) return { ...counts, state: 'paused', reason: 'paused by ctl rollout pause' };
  const pauseAfter = model.rollout?.pause_after;
  if (pauseAfter !== undefined && record?.resumed?.revision !== revision && counts.ready >= pauseAfter) {
    return {
      ...counts,
      state: 'paused',
      reason: `pause_after: ${counts.ready} of ${counts.replicas} replicas run revision ${revision}; ctl rollout resume ${model.name} to go on`,
    };
  }
  if (blocked) return { ...counts, state: 'waiting', reason: blocked };
  return { ...counts, state: 'progressing' };
}

/**
 * Step 4c: replicas of an earlier revision are replaced the way drains replace them. A
 * replacement of the new revision starts (up to `max_surge` at once), becomes ready and
 * healthy, and only then the old replica steps down and leaves once its requests finish.
 * Where no node has room for a surge replica, an old one steps down first only while
 * `max_unavailable` allows; otherwise the rollout waits and says why. A new replica that
 * fails, or is not ready by `progress_deadline_s`, halts the rollout: no further old
 * replica is touched, and the halt is stored until `ctl rollout resume` or a new revision.
 */
export function rollouts(plan: Plan): void {
  for (const model of plan.input.models) {
    const revision = plan.input.revisions?.get(model.name);
    if (revision === undefined) continue;
    const record = plan.input.rollouts?.get(model.name);
    const settings = { ...ROLLOUT_DEFAULTS, ...model.rollout };
    const mine = () => plan.live().filter((r) => r.model === model.name);
    // An outdated replica that is not serving yet is no loss: it goes now, and scaling
    // places one of the current revision in its slot.
    for (const r of mine()) {
      if (!isCurrent(r, revision) && (r.state === 'pending' || r.state === 'starting')) {
        plan.remove(r, 'outdated-not-serving', `revision ${r.revision} is outdated (now ${revision}) and the replica was not serving yet`);
      }
    }
    const serving = mine().filter((r) => !isCurrent(r, revision) && r.state === 'ready');
    if (!serving.length) continue;

    if (isHalted(record, revision)) continue;
    // The whole snapshot: a failed replica past its backoff was removed by an earlier step.
    const halt = haltOf(
      plan,
      plan.input.replicas.filter((r) => r.model === model.name),
      mine(),
      revision,
      settings.progress_deadline_s * 1000,
    );
    if (halt) {
      plan.halts.push({ model: model.name, revision, reason: halt.reason });
      if (halt.stuck) plan.remove(halt.stuck, 'rollout-halted', halt.reason);
      continue;
    }

    // A replacement that is ready and has stayed so takes over, paused or not.
    const stepped = new Set<string>();
    for (const r of serving) {
      const x = mine().find((c) => c.replaces === r.id && isCurrent(c, revision) && ACTIVE_REPLICA_STATES.has(c.state));
      if (x && plan.healthy(x)) {
        plan.stepDown(r, 'rolled-over', `replaced by ${x.id} of revision ${revision}`);
        stepped.add(r.id);
      }
    }
    const status = rolloutStatus(model, revision, [...plan.live(), ...plan.creations()], record);
    // Paused, or its memory estimate is on its way (placement would size it wrong).
    if (status.state === 'paused' || plan.input.defer?.has(model.name)) continue;

    const all = (): AnyReplica[] => [...mine(), ...plan.creations().filter((r) => r.model === model.name)];
    // A replacement is a surge one until the replica it replaces steps down, ready or not.
    const surging = () => {
      const replaced = new Set(
        mine()
          .filter((r) => ACTIVE_REPLICA_STATES.has(r.state))
          .map((r) => r.id),
      );
      return all().filter((r) => r.replaces && replaced.has(r.replaces) && isCurrent(r, revision) && ACTIVE_REPLICA_STATES.has(r.state)).length;
    };
    const { want } = wanted(plan, model);
    for (const r of serving) {
      if (stepped.has(r.id) || all().some((c) => c.replaces === r.id && ACTIVE_REPLICA_STATES.has(c.state))) continue;
      let blocked = 'max_surge is 0';
      if (settings.max_surge > 0) {
        if (surging() >= settings.max_surge) break;
        const outcome = placeReplica(plan, model, [], {
          code: 'rollout',
          reason: `replaces ${r.id} (revision ${r.revision ?? 'unknown'} → ${revision})`,
          replaces: r.id,
        });
        if (outcome.placement) continue;
        blocked = `no room for a surge replica: ${outcome.summary}`;
      }
      // In place: the old replica steps down first, and scaling starts the new one in
      // its resources once it has left. Only while enough stay ready.
      const readyNow = mine().filter((c) => c.state === 'ready').length;
      if (readyNow - 1 >= want - settings.max_unavailable) {
        plan.stepDown(r, 'rollout-in-place', `${blocked}; replaced in place (max_unavailable ${settings.max_unavailable})`);
        continue;
      }
      plan.rolloutBlocked.set(model.name, `${blocked}; max_unavailable ${settings.max_unavailable} allows no replica out of service`);
      break;
    }
  }
}

/** A replica of the new revision that failed, or is not ready by the deadline (`stuck`, to remove). */
function haltOf(
  plan: Plan,
  snapshot: readonly Replica[],
  mine: readonly Replica[],
  revision: string,
  deadlineMs: number,
): { reason: string; stuck?: Replica } | undefined {
  const failed = snapshot.find((r) => isCurrent(r, revision) && r.state === 'failed');
  // One line: the reason is shown in one line by ctl and in the events; the engine's log lines are joined.
  if (failed) return { reason: `replica ${failed.id} of revision ${revision} failed: ${(failed.error ?? 'its engine failed').replace(/\s*\n\s*/g, ' | ')}` };
  const stuck = mine.find((r) => isCurrent(r, revision) && (r.state === 'pending' || r.state === 'starting') && plan.nowMs - r.createdAtMs >= deadlineMs);
  if (stuck) return { reason: `replica ${stuck.id} of revision ${revision} was not ready within progress_deadline_s (${deadlineMs / 1000}s)`, stuck };
  return undefined;
}
