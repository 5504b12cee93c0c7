import { describe, expect, it } from '@jest/globals';
import type { EventView } from '@llmgw/shared';
import { age, eventsTable } from './events-cmd.js';

const NOW = new Date('2026-03-01T12:00:00Z');

function makeEvent(overrides: Partial<EventView> = {}): EventView {
  return {
    id: 1,
    time: '2026-03-01T11:59:30Z',
    type: 'Normal',
    source: 'admin',
    reason: 'cordon',
    object: 'node/gpu-1',
    nodes: ['gpu-1'],
    who: 'ops',
    message: 'cordoned by "ops": PSU swap',
    ...overrides,
  };
}

describe('ctl events', () => {
  it('says how long ago as kubectl does', () => {
    expect(
      ['2026-03-01T11:59:15Z', '2026-03-01T11:30:00Z', '2026-03-01T02:00:00Z', '2026-02-25T12:00:00Z', '2026-03-01T12:00:05Z'].map((t) => age(t, NOW)),
    ).toEqual(['45s', '30m', '10h', '4d', '0s']);
  });

  it('lists events oldest first as AGE TYPE REASON OBJECT MESSAGE, columns aligned', () => {
    const text = eventsTable(
      [
        makeEvent(),
        makeEvent({
          id: 2,
          time: '2026-03-01T11:59:50Z',
          source: 'reconciler',
          reason: 'drain-replacement',
          object: 'replica/r-1a2b3c4d',
          message: 'placed on gpu-2 (model tiny, profile cpu): replaces r-0 on draining node gpu-1',
        }),
      ],
      NOW,
    );
    expect(text.split('\n')).toEqual([
      'AGE   TYPE     REASON             OBJECT               MESSAGE',
      '30s   Normal   cordon             node/gpu-1           cordoned by "ops": PSU swap',
      '10s   Normal   drain-replacement  replica/r-1a2b3c4d   placed on gpu-2 (model tiny, profile cpu): replaces r-0 on draining node gpu-1',
    ]);
  });

  it("keeps a crash's multi-line message on its row: lines joined with ⏎, cut short (issue 30)", () => {
    const message = `shard 0 on n1: exited with code 1 after 3 restarts; last log lines:\nfatal: no model\n\n  at load (engine.js:3)\n${'x'.repeat(400)}`;
    const lines = eventsTable([makeEvent({ reason: 'engine-failed', type: 'Warning', message })], NOW).split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('last log lines: ⏎ fatal: no model ⏎ at load (engine.js:3) ⏎ xxx');
    expect(lines[1]!.endsWith('x…')).toBe(true);
    expect(lines[1]!.length).toBeLessThan(400);
  });

  it('says so when there are none', () => {
    expect(eventsTable([], NOW)).toBe('No events.');
  });
});
