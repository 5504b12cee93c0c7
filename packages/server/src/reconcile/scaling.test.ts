import { describe, expect, it } from '@jest/globals';
import type { ModelLoad } from './input.js';
import { makeModel, makeReplica } from '../../test/factories.js';
import { planOf } from './fixtures.js';
import { scaling } from './scaling.js';

const load = (inFlight: number, extra: Partial<ModelLoad> = {}) => new Map([['qwen-coder-14b', { inFlight, waiting: 0, ...extra }]]);

describe('scaling', () => {
  const scaled = makeModel({ scaling: { min: 1, max: 3, target_in_flight: 2, scale_down_delay_s: 60 } });

  it('plans the replicas a model is short of, each with its code and count', () => {
    const plan = planOf({ models: [scaled], replicas: [makeReplica()], load: load(5) });
    scaling(plan);
    expect(plan.desired.get('qwen-coder-14b')).toBe(3);
    expect(plan.actions.map((a) => [a.code, a.reason])).toEqual([
      ['scale-up', 'qwen-coder-14b has 1 of 3 replicas'],
      ['scale-up', 'qwen-coder-14b has 2 of 3 replicas'],
    ]);
  });

  it('does not place a model whose memory estimate is on its way, but still says what it wants', () => {
    const plan = planOf({ defer: new Set(['qwen-coder-14b']) });
    scaling(plan);
    expect(plan.actions).toEqual([]);
    expect(plan.desired.get('qwen-coder-14b')).toBe(1);
  });

  it('places a replacement away from the nodes where the model just failed', () => {
    const plan = planOf();
    plan.failedOn.set('qwen-coder-14b', ['node-1']);
    scaling(plan);
    expect(plan.creations().map((c) => c.shards[0]!.nodeId)).toEqual(['node-2']);
  });

  it('counts a failed replica in its backoff, so a crash loop is not a creation loop', () => {
    const plan = planOf({ replicas: [makeReplica({ state: 'failed' })] });
    scaling(plan);
    expect(plan.actions).toEqual([]);
  });

  it('opens the scale-down window, then removes what is not serving yet before stepping down the newest ready one', () => {
    const replicas = [
      makeReplica({ id: 'old', createdAtMs: 1 }),
      makeReplica({ id: 'new', createdAtMs: 3 }),
      makeReplica({ id: 'cold', state: 'starting', createdAtMs: 2 }),
    ];
    const first = planOf({ models: [scaled], replicas, load: load(0) });
    scaling(first);
    expect(first.actions).toEqual([]);
    expect(first.lowSince.get('qwen-coder-14b')).toBe(1_000_000);
    const later = planOf({ models: [scaled], replicas, load: load(0), lowSince: first.lowSince, nowMs: 1_000_000 + 60_000 });
    scaling(later);
    expect(later.actions.map((a) => [a.kind, a.kind === 'create' ? '' : a.replicaId, a.code])).toEqual([
      ['remove', 'cold', 'scaled-down'],
      ['update', 'new', 'scaled-down'],
    ]);
    expect(later.lowSince.has('qwen-coder-14b')).toBe(false);
  });

  it('with min 0 goes to zero after the idle timeout, with no second window', () => {
    const lazy = makeModel({ scaling: { min: 0, max: 1, idle_timeout_s: 10 } });
    const plan = planOf({ models: [lazy], replicas: [makeReplica()], load: load(0, { lastRequestMs: 1_000_000 - 10_000 }) });
    scaling(plan);
    expect(plan.actions.map((a) => [a.code, a.reason])).toEqual([['idle', 'idle for 10s (min 0)']]);
  });
});
