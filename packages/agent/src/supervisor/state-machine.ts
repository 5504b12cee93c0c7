/**
 * The life of one shard as a pure state machine: the supervisor feeds it what happened
 * (with the time), applies the new `Life` and carries out the returned decision. Nothing
 * here touches a process, a timer or a file, so the restart rules are tested without any.
 */

/** What a shard reports; `failed` is kept until the server changes or drops the assignment. */
export type LiveState = 'starting' | 'ready' | 'failed';

/** The restart rules; see `SupervisorOptions` for their meaning and defaults. */
export interface RestartPolicy {
  maxRestarts: number;
  restartWindowMs: number;
  backoffBaseMs: number;
}

/** Everything about a shard that its state transitions read or write. */
export interface Life {
  state: LiveState;
  error?: string;
  /** Launches after the first: reported to the server and shown in the launch mark. */
  restarts: number;
  /** Times of recent failures, for the restart budget and the backoff exponent. */
  failures: number[];
  /** When a starting engine that is still not ready is killed; Infinity when none is due. */
  deadlineAt: number;
  /** Consecutive failed health checks of a ready engine. */
  healthFailures: number;
  /** Why the agent itself killed the engine (startup deadline), reported with its exit. */
  killReason?: string;
}

/** What happened to a shard. `now` is the caller's clock, in ms. */
export type ShardEvent =
  /** A stopping engine holds the shard's id or one of its GPUs: the launch waits. */
  | { type: 'waiting'; blocker: string }
  /** The engine process was started. */
  | { type: 'spawned'; now: number; startupTimeoutMs: number }
  /** A running engine recorded by an earlier agent was taken over. */
  | { type: 'adopted'; now: number; startupTimeoutMs: number }
  /** The probe right after adoption, so that a ready engine does not flap through `starting`. */
  | { type: 'adoption-checked'; problem: string | null }
  /** No command can be built for the assignment: retrying would not help. */
  | { type: 'unrunnable'; message: string }
  /** The launch failed (no free port, spawn error) or the engine exited. `logTail` ends the failed reason. */
  | { type: 'exited'; how: string; now: number; logTail: string }
  /** One poll of a live engine: `problem` is null when healthy (always, for a follower). */
  | { type: 'checked'; problem: string | null; now: number; startupTimeoutMs: number }
  /** The backoff delay of a restart is over. */
  | { type: 'restart-due' };

/** What the supervisor must do after a transition. */
export type Decision =
  | { type: 'none' }
  /** Launch the engine (again) now. */
  | { type: 'launch' }
  /** Call back with `restart-due` after the delay. */
  | { type: 'restart-after'; delayMs: number }
  /** Kill the engine's process group; its exit comes back as an `exited` event. */
  | { type: 'kill'; reason: string }
  /** The restart budget is spent: the shard stays failed. */
  | { type: 'give-up' }
  /** Worth a log line: the engine became ready, or a ready one stopped answering. */
  | { type: 'ready' }
  | { type: 'unhealthy'; problem: string };

/** The result of one transition. */
export interface Step {
  life: Life;
  decision: Decision;
}

/** First restart delays double per recent failure up to this. */
export const MAX_BACKOFF_MS = 30_000;
/** Consecutive failed health checks before a ready engine is reported as not ready. */
export const UNHEALTHY_AFTER = 3;
/** Errors travel in every heartbeat; a huge log line must not. */
export const ERROR_MAX = 16_000;

/** A shard that was never launched. */
export function initialLife(restarts = 0): Life {
  return { state: 'starting', restarts, failures: [], deadlineAt: Infinity, healthFailures: 0 };
}

/** The delay before a restart, given the number of failures within the window (this one included). */
export function backoffMs(recentFailures: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** (recentFailures - 1), MAX_BACKOFF_MS);
}

const NONE: Decision = { type: 'none' };

function withState(life: Life, state: LiveState, error: string | undefined): Life {
  const next: Life = { ...life, state };
  if (error === undefined) delete next.error;
  else next.error = error.slice(0, ERROR_MAX);
  return next;
}

/** How an exit is told: after the agent's own reason for the kill, when it killed the engine. */
export function exitReason(life: Life, how: string): string {
  return life.killReason ? `${life.killReason}; ${how}` : how;
}

/** The transition for one event; `life` is not modified. */
export function step(life: Life, event: ShardEvent, policy: RestartPolicy): Step {
  switch (event.type) {
    case 'waiting':
      return { life: withState(life, 'starting', `waiting for the engine of shard ${event.blocker} to stop`), decision: NONE };
    case 'spawned':
      return {
        life: withState({ ...life, healthFailures: 0, deadlineAt: event.now + event.startupTimeoutMs }, 'starting', undefined),
        decision: NONE,
      };
    case 'adopted':
      // When it was launched is unknown; a still-loading engine gets a full deadline from now.
      return { life: { ...life, deadlineAt: event.now + event.startupTimeoutMs }, decision: NONE };
    case 'adoption-checked':
      return event.problem === null ? { life: withState(life, 'ready', undefined), decision: NONE } : { life, decision: NONE };
    case 'unrunnable':
      return { life: withState(life, 'failed', event.message), decision: NONE };
    case 'exited':
      return failure(life, event.how, event.now, event.logTail, policy);
    case 'checked':
      return checked(life, event.problem, event.now, event.startupTimeoutMs);
    case 'restart-due':
      return { life: { ...life, restarts: life.restarts + 1 }, decision: { type: 'launch' } };
  }
}

/**
 * A crash, a failed launch or a missed startup deadline. Failures older than the window
 * are forgotten; more than `maxRestarts` within it and the shard is failed for good,
 * with the engine's last log lines as the reason.
 */
function failure(life: Life, how: string, now: number, logTail: string, policy: RestartPolicy): Step {
  const what = exitReason(life, how);
  const failures = [...life.failures.filter((t) => now - t < policy.restartWindowMs), now];
  const base: Life = { ...life, failures };
  delete base.killReason;
  if (failures.length > policy.maxRestarts) {
    const reason = `${what} after ${life.restarts} restarts; last log lines:\n${logTail || '(none)'}`;
    return { life: withState(base, 'failed', reason), decision: { type: 'give-up' } };
  }
  const delayMs = backoffMs(failures.length, policy.backoffBaseMs);
  return { life: withState(base, 'starting', `${what}; restarting in ${delayMs / 1000}s`), decision: { type: 'restart-after', delayMs } };
}

/**
 * A poll of a live engine. A ready engine failing UNHEALTHY_AFTER checks in a row goes
 * back to `starting` (so the gateway stops routing to it) with a fresh deadline; a
 * starting one past its deadline is killed, and its exit then counts as a failure.
 */
function checked(life: Life, problem: string | null, now: number, startupTimeoutMs: number): Step {
  let next = life;
  let decision: Decision = NONE;
  if (problem === null) {
    next = { ...life, healthFailures: 0 };
    if (life.state !== 'ready') {
      next = withState(next, 'ready', undefined);
      decision = { type: 'ready' };
    }
  } else if (life.state === 'ready') {
    // Loading engines refuse connections or answer 503: only a ready one can turn unhealthy.
    next = { ...life, healthFailures: life.healthFailures + 1 };
    if (next.healthFailures >= UNHEALTHY_AFTER) {
      next = withState({ ...next, deadlineAt: now + startupTimeoutMs }, 'starting', `not answering health checks (${problem})`);
      decision = { type: 'unhealthy', problem };
    }
  }
  if (next.state === 'starting' && now > next.deadlineAt) {
    const reason = `not ready within ${startupTimeoutMs / 1000}s${problem ? ` (last check: ${problem})` : ''}`;
    return { life: { ...next, killReason: reason, deadlineAt: Infinity }, decision: { type: 'kill', reason } };
  }
  return { life: next, decision };
}
