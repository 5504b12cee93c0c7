import { describe, expect, it } from '@jest/globals';
import type { Profile } from '@llmgw/shared';
import { DEFAULT_POOL, placeMany, renderRejection } from './index.js';
import { makeH100Node, makeModel, makeProfile, makeRtx4090Node } from '../../test/factories.js';
import { placeOne } from './testing.js';

describe('place: sharded profiles', () => {
  const tp2: Partial<Profile> = { name: 'tp2', engine: 'vllm', gpus: 8, gpu_class: ['H100'], shards: 2, fabric: 'infiniband' };

  it('places N shards on N distinct nodes of one pool with the fabric', () => {
    const nodes = [
      makeH100Node('a-1', { pool: 'rack-a' }),
      makeH100Node('a-2', { pool: 'rack-a', fabrics: ['ethernet'] }),
      makeH100Node('b-1', { pool: 'rack-b' }),
      makeH100Node('b-2', { pool: 'rack-b' }),
    ];
    const out = placeOne(tp2, nodes);
    expect(out.placement?.pool).toBe('rack-b');
    expect(out.placement?.fabric).toBe('infiniband');
    expect(out.placement?.shards.map((s) => [s.nodeId, s.rank, s.gpuIndices.length])).toEqual([
      ['b-1', 0, 8],
      ['b-2', 1, 8],
    ]);
    expect(out.summary).toBe('placed qwen-coder-14b on b-1, b-2 in pool rack-b (profile tp2; 3/4 nodes fit)');
  });

  it('explains per pool when no pool has enough fitting nodes', () => {
    const nodes = [
      makeH100Node('a-1', { pool: 'rack-a' }),
      makeH100Node('a-2', { pool: 'rack-a', fabrics: ['ethernet'] }),
      makeH100Node('b-1', { pool: 'rack-b' }),
      makeH100Node('b-2', { pool: 'rack-b', admin: 'cordoned' }),
      makeRtx4090Node('c-1', { pool: 'rack-c', fabrics: ['infiniband'] }),
    ];
    const out = placeOne(tp2, nodes);
    expect(out.placement).toBeUndefined();
    expect(out.rejections.filter((r) => r.code === 'shards')).toEqual([
      { profile: 'tp2', pool: 'rack-a', node: undefined, code: 'shards', reason: 'pool rack-a: fits 1 of 2 shards', requested: 2, available: 1 },
      { profile: 'tp2', pool: 'rack-b', node: undefined, code: 'shards', reason: 'pool rack-b: fits 1 of 2 shards', requested: 2, available: 1 },
      { profile: 'tp2', pool: 'rack-c', node: undefined, code: 'shards', reason: 'pool rack-c: fits 0 of 2 shards', requested: 2, available: 0 },
    ]);
    expect(out.rejections.filter((r) => r.node !== undefined).map((r) => `${r.pool} ${renderRejection(r)}`)).toEqual([
      'rack-a a-2: lacks fabric infiniband',
      'rack-b b-2: is cordoned',
      'rack-c c-1: has RTX-4090 GPUs, needs H100',
    ]);
    expect(out.summary).toBe(
      '2/5 nodes can run qwen-coder-14b: 1 cordoned, 1 without H100 GPUs, 1 lacks fabric infiniband; ' +
        'pool rack-a: fits 1 of 2 shards, pool rack-b: fits 1 of 2 shards, pool rack-c: fits 0 of 2 shards',
    );
  });

  it(`groups nodes without a pool as pool "${DEFAULT_POOL}"`, () => {
    const out = placeOne(tp2, [makeH100Node('x'), makeH100Node('y')]);
    expect(out.placement?.pool).toBe(DEFAULT_POOL);
    expect(out.placement?.shards.map((s) => s.nodeId)).toEqual(['x', 'y']);
  });

  it('prefers the smaller pool that still fits, keeping the large one whole', () => {
    const nodes = [
      ...['a-1', 'a-2', 'a-3', 'a-4'].map((id) => makeH100Node(id, { pool: 'big' })),
      ...['s-1', 's-2'].map((id) => makeH100Node(id, { pool: 'small' })),
    ];
    expect(placeOne(tp2, nodes).placement?.pool).toBe('small');
  });

  it('never reuses GPUs across replicas', () => {
    const model = makeModel({ profiles: [makeProfile({ ...tp2, gpus: 4 })] });
    const nodes = [makeH100Node('x'), makeH100Node('y')];
    const { outcomes } = placeMany({
      nodes,
      reservations: [],
      requests: [1, 2, 3].map((i) => ({ model, replicaId: `r${i}` })),
    });
    expect(outcomes.map((o) => o.placement?.shards.map((s) => s.gpuIndices.join('')))).toEqual([['0123', '0123'], ['4567', '4567'], undefined]);
  });
});
