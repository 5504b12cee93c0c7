import { describe, expect, it } from '@jest/globals';
import { makeModel, makeNode, makeProfile, makeReplica } from '../../test/factories.js';
import { planOf } from './fixtures.js';
import { holdFleet, placeReplica } from './placement.js';

const why = { code: 'scale-up' as const, reason: 'test' };

describe('placeReplica', () => {
  it('plans a pending replica with the spec of its profile frozen on it, and records the attempt', () => {
    const profile = makeProfile({
      engine: 'command',
      command: ['run', '{port}'],
      args: ['--x'],
      env: { A: '1' },
      source: 'weights.gguf',
      startup_timeout_s: 9,
      min_memory_gb: 2,
    });
    const model = makeModel({ profiles: [profile] });
    const plan = planOf({ models: [model] });
    const outcome = placeReplica(plan, model, [], why);
    expect(outcome.placement).toBeDefined();
    expect(plan.attempts.get(model.name)).toBe(outcome);
    expect(plan.creations()).toEqual([
      {
        model: model.name,
        profile: 'cpu',
        state: 'pending',
        createdAtMs: 1_000_000,
        memoryMb: 2048,
        spec: { engine: 'command', source: 'weights.gguf', args: ['--x'], env: { A: '1' }, command: ['run', '{port}'], startupTimeoutS: 9 },
        shards: [{ nodeId: expect.any(String), rank: 0, gpuUuids: [], gpuIndices: [], state: 'pending' }],
      },
    ]);
    expect(plan.actions).toEqual([{ kind: 'create', code: 'scale-up', reason: 'test', replica: plan.creations()[0] }]);
  });

  it('takes what it planned off the fleet: the next replica goes where there is still room', () => {
    const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 40 })] });
    const plan = planOf({ models: [model] });
    placeReplica(plan, model, [], why);
    placeReplica(plan, model, [], why);
    expect(new Set(plan.creations().map((c) => c.shards[0]!.nodeId))).toEqual(new Set(['node-1', 'node-2']));
    const third = placeReplica(plan, model, [], why);
    expect(third.placement).toBeUndefined();
    expect(plan.creations()).toHaveLength(2);
    expect(plan.attempts.get(model.name)).toBe(third);
  });

  it('holds the resources of the replicas the removals left, and not of those removed', () => {
    const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 40 })] });
    const held = makeReplica({ id: 'held', memoryMb: 40 * 1024 });
    const plan = planOf({ models: [model], nodes: [makeNode({ id: 'node-1' })], replicas: [held] });
    holdFleet(plan);
    expect(placeReplica(plan, model, [], why).placement).toBeUndefined();
    const freed = planOf({ models: [model], nodes: [makeNode({ id: 'node-1' })], replicas: [held] });
    freed.remove(held, 'failed', 'test');
    holdFleet(freed);
    expect(placeReplica(freed, model, [], why).placement).toBeDefined();
  });
});
