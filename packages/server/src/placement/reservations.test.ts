import { describe, expect, it } from '@jest/globals';
import { indexReservations, place, placeMany, placeOnFleet, prepareFleet, renderRejection, reservationsFor, reserve } from './index.js';
import { GB, makeH100Node, makeModel, makeNode, makeProfile, makeReservation } from '../../test/factories.js';
import { placeOne } from './testing.js';

describe('place: reservations', () => {
  const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 24 })] });

  it('two 24 GB CPU replicas never share a 32 GB node', () => {
    const nodes = [makeNode({ id: 'a', memoryTotalMb: 32 * GB }), makeNode({ id: 'b', memoryTotalMb: 32 * GB })];
    const { outcomes, reservations } = placeMany({
      nodes,
      reservations: [],
      requests: [
        { model, replicaId: 'r1' },
        { model, replicaId: 'r2' },
        { model, replicaId: 'r3' },
      ],
    });
    expect(outcomes.map((o) => o.placement?.shards[0]?.nodeId)).toEqual(['a', 'b', undefined]);
    expect(reservations).toEqual([
      { replicaId: 'r1', model: model.name, nodeId: 'a', memoryMb: 24 * GB, gpuUuids: [] },
      { replicaId: 'r2', model: model.name, nodeId: 'b', memoryMb: 24 * GB, gpuUuids: [] },
    ]);
    expect(outcomes[2]!.rejections.map(renderRejection)).toEqual([
      'a: has 32 GiB of memory, 24 reserved by 1 replica, needs 24',
      'b: has 32 GiB of memory, 24 reserved by 1 replica, needs 24',
    ]);
    expect(outcomes[2]!.summary).toBe('0/2 nodes can run qwen-coder-14b: 2 too little memory');
  });

  it('place sees the same reservations as placeMany', () => {
    const nodes = [makeNode({ id: 'a', memoryTotalMb: 32 * GB })];
    const first = place({ model, nodes, reservations: [] });
    expect(first.placement).toBeDefined();
    const held = reservationsFor(first.placement!, 'r1', model.name);
    const second = place({ model, nodes, reservations: held });
    expect(second.placement).toBeUndefined();
  });

  it('GPUs held by another replica are not free', () => {
    const node = makeH100Node('g-1', {}, 4);
    const out = placeOne({ gpus: 2 }, [node], {
      reservations: [makeReservation({ nodeId: 'g-1', gpuUuids: ['g-1-gpu-0', 'g-1-gpu-2', 'g-1-gpu-3'] })],
    });
    expect(out.rejections.map(renderRejection)).toEqual(['g-1: has 1 free H100-80GB GPU, needs 2']);
  });

  it('indexReservations sums per node', () => {
    const index = indexReservations([
      makeReservation({ replicaId: 'a', nodeId: 'n', memoryMb: 10, gpuUuids: ['x'] }),
      makeReservation({ replicaId: 'b', nodeId: 'n', memoryMb: 5, gpuUuids: ['y'], model: 'm' }),
    ]);
    const n = index.get('n');
    expect(n?.memoryMb).toBe(15);
    expect([...(n?.gpuUuids ?? [])]).toEqual(['x', 'y']);
    expect(n?.replicas.size).toBe(2);
    expect(n?.models.get('m')).toBe(1);
  });
});

describe('a prepared fleet', () => {
  it('sees reservations made between decisions, wherever they land', () => {
    const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 24 })] });
    const nodes = [makeNode({ id: 'a', memoryTotalMb: 32 * GB }), makeNode({ id: 'b', memoryTotalMb: 32 * GB, admin: 'cordoned' })];
    const fleet = prepareFleet(nodes, []);
    const first = placeOnFleet(fleet, model);
    expect(first.placement?.shards[0]?.nodeId).toBe('a');
    reserve(fleet, reservationsFor(first.placement!, 'r1', model.name));
    const second = placeOnFleet(fleet, model);
    expect(second.rejections.map(renderRejection)).toEqual(['a: has 32 GiB of memory, 24 reserved by 1 replica, needs 24', 'b: is cordoned']);
    // Something else holds memory on the cordoned node: its explanation follows.
    reserve(fleet, [makeReservation({ replicaId: 'x', nodeId: 'b', memoryMb: 16 * GB })]);
    expect(placeOnFleet(fleet, model).rejections.map(renderRejection)).toEqual([
      'a: has 32 GiB of memory, 24 reserved by 1 replica, needs 24',
      'b: is cordoned',
      'b: has 32 GiB of memory, 16 reserved by 1 replica, needs 24',
    ]);
  });
});
