import { describe, expect, it } from '@jest/globals';
import { makeModel, makeProfile, makeReplica } from '../../test/factories.js';
import type { PlannedReplica } from '../reconcile/reconcile.js';
import { engineKeys } from './engine-keys.js';
import { allocatePort, frozen, materialize, newReplicaIds, withSpec } from './apply.js';

const planned: PlannedReplica = {
  model: 'm',
  profile: 'cpu',
  state: 'pending',
  createdAtMs: 5,
  memoryMb: 0,
  replaces: 'r-old',
  spec: { engine: 'llama.cpp', source: 's', args: [], env: {} },
  shards: [
    { nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'pending' },
    { nodeId: 'node-2', rank: 1, gpuUuids: [], gpuIndices: [], state: 'pending' },
  ],
};

describe('materialize', () => {
  it('gives a planned replica its ids and names its shards after it', () => {
    const r = materialize(planned, { id: 'r-x', apiKey: 'sk', masterPort: 29500 });
    expect(r).toMatchObject({ id: 'r-x', apiKey: 'sk', masterPort: 29500, replaces: 'r-old', state: 'pending', spec: planned.spec });
    expect(r.shards.map((s) => s.id)).toEqual(['r-x-0', 'r-x-1']);
    expect(materialize(planned, { id: 'r-y', apiKey: 'sk' })).not.toHaveProperty('masterPort');
  });
});

describe('newReplicaIds', () => {
  it('makes a fresh id and engine key each time', () => {
    const keyOf = engineKeys('secret');
    const a = newReplicaIds(keyOf);
    const b = newReplicaIds(keyOf, 29500);
    expect(a.id).toMatch(/^r-[0-9a-f]{8}$/);
    expect(a.apiKey).toMatch(/^sk-llmgw-engine-/);
    expect(a.apiKey).not.toBe(b.apiKey);
    expect(a.id).not.toBe(b.id);
    expect(b.masterPort).toBe(29500);
    expect(a).not.toHaveProperty('masterPort');
  });

  it('derives the key from the secret and the id: the same after a restart, another with another secret', () => {
    expect(engineKeys('secret')('r-1')).toBe(engineKeys('secret')('r-1'));
    expect(engineKeys('secret')('r-1')).not.toBe(engineKeys('secret')('r-2'));
    expect(engineKeys('other')('r-1')).not.toBe(engineKeys('secret')('r-1'));
  });
});

describe('allocatePort', () => {
  it('skips ports that replicas still holding resources use, and wraps', () => {
    const replicas = [
      makeReplica({ masterPort: 29500 }),
      makeReplica({ masterPort: 29501, state: 'draining' }),
      makeReplica({ masterPort: 29502, state: 'failed' }),
    ];
    expect(allocatePort(replicas, 29500)).toEqual({ port: 29502, next: 29503 });
    expect(allocatePort([], 29999)).toEqual({ port: 29999, next: 29500 });
  });
});

describe('withSpec', () => {
  it('gives a replica stored before specs were frozen the spec of its catalog profile, if there is one', () => {
    const model = makeModel({ profiles: [makeProfile({ args: ['--a'] })] });
    expect(withSpec(makeReplica(), [model]).spec).toEqual({ engine: 'llama.cpp', source: model.source, args: ['--a'], env: {} });
    expect(withSpec(makeReplica(), []).spec).toBeUndefined();
    const own = makeReplica({ spec: { engine: 'vllm', source: 'x', args: [], env: {} } });
    expect(withSpec(own, [model])).toBe(own);
  });
});

describe('frozen', () => {
  it('freezes a replica and its shards, so a reader cannot change it', () => {
    const r = frozen(makeReplica());
    expect(() => ((r.shards[0] as { state: string }).state = 'failed')).toThrow(TypeError);
    expect(() => ((r as { state: string }).state = 'failed')).toThrow(TypeError);
  });
});
