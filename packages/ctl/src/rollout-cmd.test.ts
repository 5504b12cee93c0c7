import { describe, expect, it } from '@jest/globals';
import type { RolloutView } from '@llmgw/shared';
import { rolloutLine, waitForRollout, type RolloutWatch } from './rollout-cmd.js';
import { historyTable } from './tables.js';

const view = (o: Partial<RolloutView> = {}): RolloutView => ({
  model: 'm',
  revision: 'bbbbbbbbbbbb',
  state: 'progressing',
  replicas: 2,
  updated: 1,
  ready: 0,
  outdated: 2,
  max_surge: 1,
  max_unavailable: 0,
  progress_deadline_s: 600,
  paused: false,
  history: [],
  ...o,
});

/** A watch over a list of answers, on a clock that moves a second per poll. */
function watch(answers: RolloutView[], timeoutMs = 60_000): RolloutWatch & { lines: string[] } {
  let t = 0;
  const lines: string[] = [];
  return {
    model: 'm',
    timeoutMs,
    timeoutText: `${timeoutMs / 1000}s`,
    progressEveryMs: 15_000,
    pollMs: 1000,
    lines,
    // The last answer repeats.
    fetch: async () => (answers.length > 1 ? answers.shift()! : answers[0]!),
    now: () => t,
    sleep: async (ms) => void (t += ms),
    progress: (l) => void lines.push(l),
  };
}

describe('ctl rollout status', () => {
  it('prints each change of where the rollout stands and returns once complete', async () => {
    const w = watch([view(), view(), view({ updated: 2, ready: 1, outdated: 1 }), view({ state: 'complete', updated: 2, ready: 2, outdated: 0 })]);
    await expect(waitForRollout(w)).resolves.toMatchObject({ state: 'complete' });
    expect(w.lines).toEqual([
      '  1 of 2 replicas at revision bbbbbbbbbbbb, 0 ready, 2 of an earlier revision (progressing)',
      '  2 of 2 replicas at revision bbbbbbbbbbbb, 1 ready, 1 of an earlier revision (progressing)',
    ]);
  });

  it('fails at once with the reason when halted, and at the timeout with where it stands', async () => {
    await expect(waitForRollout(watch([view(), view({ state: 'halted', reason: 'replica r-3 failed: exit 1' })]))).rejects.toThrow(
      /halted: replica r-3 failed: exit 1 \(the old revision keeps serving/,
    );
    await expect(waitForRollout(watch([view({ state: 'waiting', reason: 'no room' })], 5_000))).rejects.toThrow(
      /not complete after 5s: .*\(waiting: no room\)/,
    );
  });

  it('history: a line per revision, the current one marked', () => {
    const h = historyTable(
      view({
        history: [
          { revision: 'aaa', since: '2026-01-01T00:00:00.000Z', change: 'first revision', current: false },
          { revision: 'bbb', since: '2026-01-02T00:00:00.000Z', change: 'profiles.cpu.args: [] → ["--x"]', current: true },
        ],
      }),
    );
    expect(h.split('\n')).toEqual([
      'REVISION  SINCE                     CURRENT  CHANGE',
      'aaa       2026-01-01T00:00:00.000Z           first revision',
      'bbb       2026-01-02T00:00:00.000Z  *        profiles.cpu.args: [] → ["--x"]',
    ]);
    expect(rolloutLine(view({ state: 'complete', updated: 2, ready: 2, outdated: 0 }))).toBe('2 of 2 replicas at revision bbbbbbbbbbbb, 2 ready (complete)');
  });
});
