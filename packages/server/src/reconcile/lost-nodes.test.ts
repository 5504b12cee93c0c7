import { describe, expect, it } from '@jest/globals';
import { makeNode, makeReplica } from '../../test/factories.js';
import { planOf } from './fixtures.js';
import { lostNodes } from './lost-nodes.js';

const on = (id: string, nodeId: string, state: 'ready' | 'draining' | 'failed' = 'ready') =>
  makeReplica({ id, state, shards: [{ id: `${id}-0`, nodeId, rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }] });

describe('lostNodes', () => {
  const fleet = [makeNode({ id: 'node-1', liveness: 'lost', lastSeenAgoS: 400 }), makeNode({ id: 'node-2' }), makeNode({ id: 'node-3' })];

  it('removes replicas on a lost node and on a node no longer known, saying which', () => {
    const plan = planOf({ nodes: fleet, replicas: [on('a', 'node-1'), on('b', 'node-9'), on('c', 'node-2'), on('d', 'node-1', 'failed')] });
    lostNodes(plan);
    expect(plan.actions.map((a) => (a.kind === 'remove' ? [a.replicaId, a.code, a.reason] : []))).toEqual([
      ['a', 'node-lost', 'node node-1 is lost (silent 400s); replacing elsewhere'],
      ['b', 'node-unknown', 'node node-9 is no longer known'],
      ['d', 'node-lost', 'node node-1 is lost (silent 400s); replacing elsewhere'],
    ]);
    expect(plan.paused).toBeUndefined();
  });

  it('leaves a draining replica to its drain', () => {
    const plan = planOf({ nodes: fleet, replicas: [on('a', 'node-1', 'draining')] });
    lostNodes(plan);
    expect(plan.actions).toEqual([]);
  });

  it('replaces nothing when more than the allowed share of the fleet is lost at once, and says why', () => {
    const nodes = [makeNode({ id: 'node-1', liveness: 'lost' }), makeNode({ id: 'node-2', liveness: 'lost' }), makeNode({ id: 'node-3' })];
    const plan = planOf({ nodes, replicas: [on('a', 'node-1')] });
    lostNodes(plan);
    expect(plan.actions).toEqual([]);
    expect(plan.paused).toBe(
      "2 of 3 nodes went silent (node-1, node-2); not replacing their replicas: that many at once is more likely this server's own network",
    );
  });

  it('a fleet of one node that is lost is not a network partition: its replicas are replaced', () => {
    const plan = planOf({ nodes: [makeNode({ id: 'node-1', liveness: 'lost' })], replicas: [on('a', 'node-1')] });
    lostNodes(plan);
    expect(plan.paused).toBeUndefined();
    expect(plan.actions.map((a) => a.code)).toEqual(['node-lost']);
  });
});
