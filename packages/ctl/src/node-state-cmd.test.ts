import { describe, expect, it } from '@jest/globals';
import type { NodeView } from '@llmgw/shared';
import { durationText, elapsed, waitForDrain, type DrainWatch } from './node-state-cmd.js';

const node = (over: Partial<NodeView> = {}): NodeView => ({
  id: 'roomy',
  state: 'draining',
  liveness: 'ready',
  labels: {},
  gpu_total: 0,
  gpu_free: 0,
  gpu_classes: [],
  fabrics: [],
  unhealthy_gpus: [],
  last_seen_s: 1,
  replicas: 1,
  drain_status: '1 replica left: r-1 (big) cannot move: 0/2 nodes can run big',
  ...over,
});

/** A watch on a fake clock: each poll advances it by `pollMs`; `views` are what the server answers, the last repeated. */
function watch(views: NodeView[], over: Partial<DrainWatch> = {}) {
  let t = 0;
  const lines: string[] = [];
  const w: DrainWatch = {
    node: 'roomy',
    timeoutMs: 35_000,
    timeoutText: '35s',
    progressEveryMs: 10_000,
    pollMs: 1000,
    fetchNode: () => Promise.resolve(views.length > 1 ? views.shift() : views[0]),
    now: () => t,
    sleep: (ms) => {
      t += ms;
      return Promise.resolve();
    },
    progress: (l) => lines.push(`${t / 1000}s ${l}`),
    ...over,
  };
  return { w, lines };
}

describe('waitForDrain', () => {
  it('on a stuck node prints the status, then the elapsed time every 10 s, and fails at the timeout with what blocks', async () => {
    const { w, lines } = watch([node()]);
    await expect(waitForDrain(w)).rejects.toMatchObject({
      failure: 'failed',
      message: 'node roomy still holds 1 shard(s) after 35s: 1 replica left: r-1 (big) cannot move: 0/2 nodes can run big (the drain goes on; see ctl nodes)',
    });
    expect(lines).toEqual([
      '0s   1 replica left: r-1 (big) cannot move: 0/2 nodes can run big',
      '10s   still draining after 10s: 1 replica left: r-1 (big) cannot move: 0/2 nodes can run big',
      '20s   still draining after 20s: 1 replica left: r-1 (big) cannot move: 0/2 nodes can run big',
      '30s   still draining after 30s: 1 replica left: r-1 (big) cannot move: 0/2 nodes can run big',
    ]);
  });

  it('prints each change at once and returns the empty node', async () => {
    const moving = node({ drain_status: '1 replica left: r-1 (big) waiting for replacement r-2 (starting)' });
    const { w, lines } = watch([
      moving,
      moving,
      node({ drain_status: '1 replica left: r-1 (big) finishing in-flight requests' }),
      node({ replicas: 0, drain_status: 'drained: no replicas left' }),
    ]);
    expect((await waitForDrain(w)).replicas).toBe(0);
    expect(lines).toEqual([
      '0s   1 replica left: r-1 (big) waiting for replacement r-2 (starting)',
      '2s   1 replica left: r-1 (big) finishing in-flight requests',
    ]);
  });

  it('fails when the drain is cancelled or the node is gone', async () => {
    await expect(waitForDrain(watch([node({ state: 'ready' })]).w)).rejects.toThrow('node roomy is ready now; the drain was cancelled');
    await expect(waitForDrain(watch([], { fetchNode: () => Promise.resolve(undefined) }).w)).rejects.toThrow('node roomy disappeared');
  });

  it('says elapsed time as an operator reads it', () => {
    expect([elapsed(9_999), elapsed(125_000), elapsed(3_720_000)]).toEqual(['9s', '2m05s', '1h02m']);
  });
});

describe('durationText', () => {
  it('gives plain seconds their unit (ctl drain --timeout 5 fails "after 5s:", not "after 5:")', () => {
    expect(durationText('5')).toBe('5s');
    expect(durationText(' 2.5 ')).toBe('2.5s');
    expect(durationText('10m')).toBe('10m');
    expect(durationText('90s')).toBe('90s');
  });
});
