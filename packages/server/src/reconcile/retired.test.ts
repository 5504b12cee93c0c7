import { describe, expect, it } from '@jest/globals';
import { makeModel, makeProfile, makeReplica } from '../../test/factories.js';
import { planOf, snapshot } from './fixtures.js';
import { reconcile } from './reconcile.js';
import { retired } from './retired.js';

describe('retired', () => {
  it('removes replicas whose model or profile left the catalog, and stopped ones, each with its code', () => {
    const plan = planOf({
      models: [makeModel({ profiles: [makeProfile({ name: 'gpu' })] }), makeModel({ name: 'kept' })],
      replicas: [
        makeReplica({ id: 'a', model: 'gone' }),
        makeReplica({ id: 'b', profile: 'cpu' }),
        makeReplica({ id: 'c', model: 'kept', state: 'stopped' }),
        makeReplica({ id: 'd', model: 'kept' }),
      ],
    });
    retired(plan);
    expect(plan.actions.map((a) => [a.kind, a.kind === 'create' ? '' : a.replicaId, a.code, a.reason])).toEqual([
      ['remove', 'a', 'model-gone', 'model gone is no longer in the catalog'],
      ['remove', 'b', 'profile-gone', 'profile cpu is no longer in model qwen-coder-14b'],
      ['remove', 'c', 'stopped', 'stopped'],
    ]);
    expect(plan.live().map((r) => r.id)).toEqual(['d']);
  });

  it('runs before failures: a failed replica of a model that is gone is removed once, as gone', () => {
    const r = reconcile(snapshot({ models: [], replicas: [makeReplica({ model: 'gone', state: 'failed', createdAtMs: 0 })] }));
    expect(r.actions.map((a) => a.code)).toEqual(['model-gone']);
  });
});
