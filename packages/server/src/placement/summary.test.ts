import { describe, expect, it } from '@jest/globals';
import { reasonCounts, renderRejection, summarize } from './index.js';
import { GB, makeH100Node, makeNode } from '../../test/factories.js';
import { placeOne } from './testing.js';

describe('summarize', () => {
  it('says why each node cannot run the model, counted by reason', () => {
    const profile = { min_memory_gb: 24, node_selector: { role: 'coding' } };
    const coding = { labels: { role: 'coding' } };
    const out = placeOne(profile, [
      makeNode({ id: 'n1', memoryTotalMb: 8 * GB, ...coding }),
      makeNode({ id: 'n2', memoryTotalMb: 8 * GB, ...coding }),
      makeNode({ id: 'n3', memoryTotalMb: 16 * GB, ...coding }),
      makeNode({ id: 'n4', admin: 'cordoned', memoryTotalMb: 8 * GB, ...coding }),
      makeNode({ id: 'n5' }),
    ]);
    expect(out.summary).toBe('0/5 nodes can run qwen-coder-14b: 3 too little memory, 1 cordoned, 1 lacks label role=coding');
  });

  it('pluralises and sorts by count', () => {
    const out = placeOne({ node_selector: { role: 'coding' } }, [
      makeNode({ id: 'a' }),
      makeNode({ id: 'b', labels: { role: 'batch' } }),
      makeNode({ id: 'c', admin: 'draining' }),
    ]);
    expect(out.summary).toBe('0/3 nodes can run qwen-coder-14b: 2 lack label role=coding, 1 draining');
  });

  it('says so when there are no nodes', () => {
    expect(placeOne({}, []).summary).toBe('0/0 nodes can run qwen-coder-14b: no nodes in the inventory');
  });

  it('names only a few pools', () => {
    const line = summarize('m', [
      {
        profile: 'tp',
        shards: 4,
        nodes: 9,
        fit: 9,
        reasons: [],
        pools: ['p1', 'p2', 'p3', 'p4', 'p5'].map((pool) => ({ pool, fit: 3 })),
      },
    ]);
    expect(line).toBe('9/9 nodes can run m: pool p1: fits 3 of 4 shards, pool p2: fits 3 of 4 shards, pool p3: fits 3 of 4 shards, 2 more pools');
  });
});

describe('renderRejection', () => {
  it('prefixes the node, and leaves pool lines alone', () => {
    expect(renderRejection({ profile: 'cpu', node: 'node-7', code: 'memory', reason: 'has 8 GiB of memory, needs 24' })).toBe(
      'node-7: has 8 GiB of memory, needs 24',
    );
    expect(renderRejection({ profile: 'tp2', pool: 'rack-a', code: 'shards', reason: 'pool rack-a: fits 1 of 2 shards' })).toBe(
      'pool rack-a: fits 1 of 2 shards',
    );
  });
});

describe('reasons', () => {
  it('counts the summary by code, merging the categories of one code', () => {
    const out = placeOne({ gpus: 2, node_selector: { role: 'coding', tier: 'gold' } }, [
      makeNode({ id: 'a', labels: { tier: 'gold' } }),
      makeNode({ id: 'b', labels: { role: 'coding' } }),
      makeNode({ id: 'c', labels: { role: 'coding', tier: 'gold' } }),
      makeH100Node('d', { labels: { role: 'coding', tier: 'gold' } }, 1),
      makeNode({ id: 'e', admin: 'cordoned' }),
    ]);
    expect(out.summary).toBe(
      '0/5 nodes can run qwen-coder-14b: 1 cordoned, 1 lacks label role=coding, 1 lacks label tier=gold, 1 without GPUs, 1 too few free GPUs',
    );
    expect(out.reasons).toEqual([
      { code: 'label', count: 2 },
      { code: 'gpu_count', count: 2 },
      { code: 'cordoned', count: 1 },
    ]);
  });

  it('is empty when placed, and when there is nothing to count', () => {
    expect(placeOne({}, [makeNode()]).reasons).toEqual([]);
    expect(placeOne({}, []).reasons).toEqual([]);
    expect(reasonCounts([])).toEqual([]);
  });
});
