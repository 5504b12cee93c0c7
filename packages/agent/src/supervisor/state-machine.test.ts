import { describe, expect, it } from '@jest/globals';
import { ERROR_MAX, MAX_BACKOFF_MS, backoffMs, initialLife, step, type Decision, type Life, type RestartPolicy, type ShardEvent } from './state-machine.js';

const policy: RestartPolicy = { maxRestarts: 3, restartWindowMs: 60_000, backoffBaseMs: 1_000 };
const TIMEOUT = 10_000;

/** Runs events in order from `life`, returning the last life and every decision. */
function run(life: Life, events: ShardEvent[], p = policy): { life: Life; decisions: Decision[] } {
  const decisions: Decision[] = [];
  for (const e of events) {
    const next = step(life, e, p);
    life = next.life;
    decisions.push(next.decision);
  }
  return { life, decisions };
}

const spawned = (now: number): ShardEvent => ({ type: 'spawned', now, startupTimeoutMs: TIMEOUT });
const exited = (now: number, logTail = 'boom'): ShardEvent => ({ type: 'exited', how: 'exited with code 1', now, logTail });
const checked = (now: number, problem: string | null): ShardEvent => ({ type: 'checked', problem, now, startupTimeoutMs: TIMEOUT });
const ready = (): Life => run(initialLife(), [spawned(0), checked(1, null)]).life;

describe('restarts and backoff', () => {
  it('a crash restarts after the base delay, doubling per recent failure', () => {
    const { life, decisions } = run(initialLife(), [spawned(0), exited(100), { type: 'restart-due' }, spawned(1200), exited(1300)]);
    expect(decisions).toEqual([
      { type: 'none' },
      { type: 'restart-after', delayMs: 1000 },
      { type: 'launch' },
      { type: 'none' },
      { type: 'restart-after', delayMs: 2000 },
    ]);
    expect(life).toMatchObject({ state: 'starting', restarts: 1, error: 'exited with code 1; restarting in 2s' });
  });

  it('the delay is capped', () => {
    expect(backoffMs(1, 1000)).toBe(1000);
    expect(backoffMs(3, 1000)).toBe(4000);
    expect(backoffMs(20, 1000)).toBe(MAX_BACKOFF_MS);
  });

  it('more than maxRestarts failures within the window: failed, with the restarts and the log tail', () => {
    let life = initialLife();
    const decisions: Decision[] = [];
    for (let i = 0; i < 4; i++) {
      const r = run(life, [spawned(i * 100), exited(i * 100 + 50, 'fatal: no model'), ...(i < 3 ? [{ type: 'restart-due' } as const] : [])]);
      life = r.life;
      decisions.push(r.decisions[1]!);
    }
    expect(decisions.map((d) => d.type)).toEqual(['restart-after', 'restart-after', 'restart-after', 'give-up']);
    expect(life.state).toBe('failed');
    expect(life.error).toBe('exited with code 1 after 3 restarts; last log lines:\nfatal: no model');
  });

  it('an empty log tail reads "(none)"; maxRestarts 0 gives up on the first failure', () => {
    const { life, decisions } = run(initialLife(), [spawned(0), exited(1, '')], { ...policy, maxRestarts: 0 });
    expect(decisions[1]).toEqual({ type: 'give-up' });
    expect(life.error).toBe('exited with code 1 after 0 restarts; last log lines:\n(none)');
  });

  it('failures older than the window are forgotten: the budget and the backoff start over', () => {
    const old = { ...initialLife(2), failures: [0, 10, 20] };
    const { life, decisions } = run(old, [exited(60_020 + 1)]);
    expect(decisions).toEqual([{ type: 'restart-after', delayMs: 1000 }]);
    expect(life.failures).toEqual([60_021]);
  });

  it('a failure just inside the window still counts', () => {
    const { decisions } = run({ ...initialLife(), failures: [1] }, [exited(60_000)]);
    expect(decisions).toEqual([{ type: 'restart-after', delayMs: 2000 }]);
  });

  it('an assignment no command can be built for is failed without a restart', () => {
    const { life, decisions } = run(initialLife(), [{ type: 'unrunnable', message: 'unknown engine "x"' }]);
    expect(decisions).toEqual([{ type: 'none' }]);
    expect(life).toMatchObject({ state: 'failed', error: 'unknown engine "x"' });
  });

  it('a launch that waits for a stopping engine says which', () => {
    const { life } = run(initialLife(), [{ type: 'waiting', blocker: 'old' }]);
    expect(life).toMatchObject({ state: 'starting', error: 'waiting for the engine of shard old to stop' });
  });

  it('errors are cut to ERROR_MAX', () => {
    const { life } = run(initialLife(), [{ type: 'unrunnable', message: 'x'.repeat(ERROR_MAX + 10) }]);
    expect(life.error).toHaveLength(ERROR_MAX);
  });

  it('does not modify the life it is given', () => {
    const before = initialLife();
    const copy = structuredClone(before);
    step(before, exited(5), policy);
    expect(before).toEqual(copy);
  });
});

describe('readiness, health and the startup deadline', () => {
  it('a passing check makes a starting engine ready, once', () => {
    const { life, decisions } = run(initialLife(), [spawned(0), checked(1, null), checked(2, null)]);
    expect(decisions).toEqual([{ type: 'none' }, { type: 'ready' }, { type: 'none' }]);
    expect(life.state).toBe('ready');
    expect(life.error).toBeUndefined();
  });

  it('a loading engine failing checks is normal: no count, no change', () => {
    const { life } = run(initialLife(), [spawned(0), checked(1, 'ECONNREFUSED'), checked(2, '/health answered 503')]);
    expect(life).toMatchObject({ state: 'starting', healthFailures: 0 });
  });

  it('a ready engine goes back to starting after 3 failed checks in a row, with a fresh deadline', () => {
    const { life, decisions } = run(ready(), [checked(2, 'timeout'), checked(3, 'timeout'), checked(4, 'timeout')]);
    expect(decisions).toEqual([{ type: 'none' }, { type: 'none' }, { type: 'unhealthy', problem: 'timeout' }]);
    expect(life).toMatchObject({ state: 'starting', error: 'not answering health checks (timeout)', deadlineAt: 4 + TIMEOUT });
  });

  it('a passing check in between resets the count', () => {
    const { life } = run(ready(), [checked(2, 'x'), checked(3, 'x'), checked(4, null), checked(5, 'x'), checked(6, 'x')]);
    expect(life).toMatchObject({ state: 'ready', healthFailures: 2 });
  });

  it('an unhealthy engine that recovers is ready again, its error cleared', () => {
    const { life } = run(ready(), [checked(2, 'x'), checked(3, 'x'), checked(4, 'x'), checked(5, null)]);
    expect(life.state).toBe('ready');
    expect(life.error).toBeUndefined();
  });

  it('a start past its deadline is killed; its exit is reported with the reason', () => {
    const late = run(initialLife(), [spawned(0), checked(TIMEOUT, 'ECONNREFUSED'), checked(TIMEOUT + 1, '/health answered 503')]);
    const reason = 'not ready within 10s (last check: /health answered 503)';
    expect(late.decisions.slice(1)).toEqual([{ type: 'none' }, { type: 'kill', reason }]);
    expect(late.life.deadlineAt).toBe(Infinity);
    const { life } = run(late.life, [{ type: 'exited', how: 'killed by SIGKILL', now: TIMEOUT + 2, logTail: '' }]);
    expect(life.error).toBe(`${reason}; killed by SIGKILL; restarting in 1s`);
    expect(life.killReason).toBeUndefined();
  });

  it('a passing check is never late', () => {
    const { life, decisions } = run(initialLife(), [spawned(0), checked(TIMEOUT * 2, null)]);
    expect(decisions[1]).toEqual({ type: 'ready' });
    expect(life.state).toBe('ready');
  });

  it('a relaunch clears the error and the health count and sets a new deadline', () => {
    const { life } = run({ ...ready(), healthFailures: 2, error: 'old' }, [spawned(500)]);
    expect(life).toMatchObject({ state: 'starting', healthFailures: 0, deadlineAt: 500 + TIMEOUT });
    expect(life.error).toBeUndefined();
  });
});

describe('adoption', () => {
  it('an adopted engine keeps its restarts and gets a full deadline from now', () => {
    const { life } = run(initialLife(4), [{ type: 'adopted', now: 1000, startupTimeoutMs: TIMEOUT }]);
    expect(life).toMatchObject({ state: 'starting', restarts: 4, deadlineAt: 1000 + TIMEOUT });
  });

  it('is ready at once when its first probe passes, starting otherwise', () => {
    const adopted = run(initialLife(), [{ type: 'adopted', now: 0, startupTimeoutMs: TIMEOUT }]).life;
    expect(step(adopted, { type: 'adoption-checked', problem: null }, policy).life.state).toBe('ready');
    expect(step(adopted, { type: 'adoption-checked', problem: 'ECONNREFUSED' }, policy).life).toEqual(adopted);
  });
});
