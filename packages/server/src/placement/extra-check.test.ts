import { describe, expect, it } from '@jest/globals';
import type { Model } from '@llmgw/shared';
import type { NodeSnapshot, Reservation } from '../snapshot.js';
import { CHECKS, reject, type Check, type DynamicCheck } from './checks.js';
import { placeOnFleet, prepareFleet, reservationsFor, reserve } from './index.js';
import { makeModel, makeNode, makeProfile } from '../../test/factories.js';

/**
 * A dynamic check beyond GPUs and memory, which CHECKS does not have yet: the path a new
 * one takes (its own column where it applies, lowered by `reserve`, tested by both pick
 * loops, explained by the table). Replica slots: one per CPU core, each replica on the
 * node taking one, for profiles that set `min_cpu_cores`.
 */
const slots: DynamicCheck = {
  static: false,
  column: 'count',
  categories: () => [{ rank: 96, code: 'cpu_cores', one: 'has no free replica slot', many: 'have no free replica slot' }],
  applies: (req) => (req.profile.min_cpu_cores ?? 0) > 0,
  need: () => 1,
  left: (node, usage) => (node.cpuCores ?? Infinity) - (usage?.replicas.size ?? 0),
  taken: (_node, r, before) => (before?.replicas.has(r.replicaId) === true ? 0 : 1),
  explain(node, usage, _req, d) {
    const taken = usage?.replicas.size ?? 0;
    reject(d, 0, `has ${node.cpuCores} replica slots, ${taken} taken`, 1, Math.max(0, (node.cpuCores ?? 0) - taken));
  },
};
const TABLE: readonly Check[] = [...CHECKS, slots];

const GB = 1024;
const model: Model = makeModel({ name: 'm', profiles: [makeProfile({ name: 'cpu', min_cpu_cores: 1, min_memory_gb: 1 })] });

/** Places `count` replicas of `m` one after another, as placeMany does, under TABLE. */
function placeSeveral(m: Model, nodes: NodeSnapshot[], count: number, held: Reservation[] = []) {
  const fleet = prepareFleet(nodes, held, TABLE);
  return Array.from({ length: count }, (_, i) => {
    const out = placeOnFleet(fleet, m);
    if (out.placement) reserve(fleet, reservationsFor(out.placement, `r-${i}`, m.name));
    return out;
  });
}

describe('placement: a third dynamic check', () => {
  it('is tested on every decision and lowered by each reservation, then explained', () => {
    const nodes = [makeNode({ id: 'a', cpuCores: 2, memoryTotalMb: 64 * GB }), makeNode({ id: 'b', cpuCores: 1, memoryTotalMb: 64 * GB })];
    const outs = placeSeveral(model, nodes, 4);
    expect(outs.map((o) => o.placement?.shards[0]?.nodeId)).toEqual(['a', 'b', 'a', undefined]);
    const last = outs[3]!;
    expect(last.summary).toBe('0/2 nodes can run m: 2 have no free replica slot');
    expect(last.reasons).toEqual([{ code: 'cpu_cores', count: 2 }]);
    expect(last.rejections.map((r) => [r.node, r.reason, r.available])).toEqual([
      ['a', 'has 2 replica slots, 2 taken', 0],
      ['b', 'has 1 replica slots, 1 taken', 0],
    ]);
  });

  it('counts the reservations the fleet starts with', () => {
    const nodes = [makeNode({ id: 'a', cpuCores: 1, memoryTotalMb: 64 * GB }), makeNode({ id: 'b', cpuCores: 2, memoryTotalMb: 64 * GB })];
    const held: Reservation[] = [{ nodeId: 'b', replicaId: 'old', model: 'other', memoryMb: GB, gpuUuids: [] }];
    // b first: best fit on memory (1 GiB of it is held). Its one slot left is then taken,
    // and without the check the third replica would go to b again (less memory free).
    expect(placeSeveral(model, nodes, 3, held).map((o) => o.placement?.shards[0]?.nodeId)).toEqual(['b', 'a', undefined]);
  });

  it('holds for each shard of a sharded profile', () => {
    const sharded = makeModel({ name: 'm2', profiles: [makeProfile({ name: 'tp2', min_cpu_cores: 1, shards: 2 })] });
    const cores: Record<string, number> = { w: 1, x: 1, y: 1, z: 2 };
    const nodes = Object.entries(cores).map(([id, cpuCores]) => makeNode({ id, pool: 'p', cpuCores, memoryTotalMb: 64 * GB }));
    const outs = placeSeveral(sharded, nodes, 3);
    // Without the check the third replica would go back to w and x; with it only z has a slot left.
    expect(outs.map((o) => o.placement?.shards.map((s) => s.nodeId))).toEqual([['w', 'x'], ['y', 'z'], undefined]);
    expect(outs[2]!.rejections.find((r) => r.code === 'shards')).toMatchObject({ pool: 'p', reason: 'pool p: fits 1 of 2 shards', available: 1 });
  });
});
