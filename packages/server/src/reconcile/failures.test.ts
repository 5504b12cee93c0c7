import { describe, expect, it } from '@jest/globals';
import { makeReplica } from '../../test/factories.js';
import { failedBackoffMs, failures } from './failures.js';
import { planOf, snapshot } from './fixtures.js';

const policy = snapshot().policy;

describe('failedBackoffMs', () => {
  it('starts at the first backoff, doubles per earlier failure of the model, and stops at ten minutes', () => {
    expect(failedBackoffMs(policy, undefined)).toBe(30_000);
    expect(failedBackoffMs(policy, 1)).toBe(30_000);
    expect(failedBackoffMs(policy, 3)).toBe(120_000);
    expect(failedBackoffMs(policy, 20)).toBe(600_000);
  });
});

describe('failures', () => {
  const failed = (createdAtMs: number) =>
    makeReplica({
      state: 'failed',
      error: 'exited 1',
      createdAtMs,
      shards: [{ id: 'r-1-0', nodeId: 'node-2', rank: 0, gpuUuids: [], gpuIndices: [], state: 'failed' }],
    });

  it('keeps a failed replica through its backoff, then removes it and remembers where it failed', () => {
    const young = planOf({ replicas: [failed(1_000_000 - 29_000)] });
    failures(young);
    expect(young.actions).toEqual([]);
    const old = planOf({ replicas: [failed(1_000_000 - 30_000)] });
    failures(old);
    expect(old.actions).toEqual([{ kind: 'remove', code: 'failed', replicaId: 'r-1', model: 'qwen-coder-14b', reason: 'replaced after failing: exited 1' }]);
    expect(old.failedOn.get('qwen-coder-14b')).toEqual(['node-2']);
  });

  it('reads the failure count from the snapshot: a model that failed twice waits twice as long', () => {
    const plan = planOf({ replicas: [failed(1_000_000 - 30_000)], failures: new Map([['qwen-coder-14b', 2]]) });
    failures(plan);
    expect(plan.actions).toEqual([]);
  });

  it('leaves replicas that did not fail alone', () => {
    const plan = planOf({ replicas: [makeReplica({ createdAtMs: 0 })] });
    failures(plan);
    expect(plan.actions).toEqual([]);
  });
});
