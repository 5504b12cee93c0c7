import { describe, expect, it } from '@jest/globals';
import { place, renderRejection } from './index.js';
import { GB, makeGpu, makeH100Node, makeModel, makeNode, makeProfile, makeReservation } from '../../test/factories.js';
import { placeOne } from './testing.js';

describe('place: fitting', () => {
  it('a profile with no requirement fits any ready node', () => {
    const out = placeOne({}, [makeNode({ memoryTotalMb: undefined, fabrics: [] })]);
    expect(out.placement?.shards).toEqual([{ nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [] }]);
    expect(out.rejections).toEqual([]);
    expect(out.notes).toEqual([]);
    expect(out.summary).toBe('placed qwen-coder-14b on node-1 (profile cpu; 1/1 nodes fit)');
  });

  it('a node that did not report memory is eligible, with a note', () => {
    const out = placeOne({ min_memory_gb: 24 }, [makeNode({ memoryTotalMb: undefined })]);
    expect(out.placement?.shards[0]?.nodeId).toBe('node-1');
    expect(out.notes).toEqual([
      {
        profile: 'cpu',
        node: 'node-1',
        note: 'memory unknown (agent did not report it); min_memory_gb 24 not checked',
      },
    ]);
  });

  it('prefers a node known to fit over one whose memory is unknown', () => {
    const out = placeOne({ min_memory_gb: 24 }, [makeNode({ id: 'a-unknown', memoryTotalMb: undefined }), makeNode({ id: 'z-known', memoryTotalMb: 32 * GB })]);
    expect(out.placement?.shards[0]?.nodeId).toBe('z-known');
    expect(out.notes).toEqual([]);
  });

  it('class matches by prefix and GPUs go lowest index first, skipping reserved and unhealthy ones', () => {
    const node = makeH100Node('g-1');
    node.gpus[0] = makeGpu({ index: 0, uuid: 'g-1-gpu-0', problems: ['fell off the bus (Xid 79)'] });
    const out = placeOne({ gpus: 2, gpu_class: ['H100'] }, [node], {
      reservations: [makeReservation({ nodeId: 'g-1', gpuUuids: ['g-1-gpu-1'] })],
    });
    expect(out.placement?.shards[0]).toEqual({
      nodeId: 'g-1',
      rank: 0,
      gpuUuids: ['g-1-gpu-2', 'g-1-gpu-3'],
      gpuIndices: [2, 3],
    });
  });

  it('GPU memory that was not reported is not checked, and says so', () => {
    const node = makeH100Node('g-1', { gpus: [makeGpu({ index: 0, uuid: 'u0', memory_total_mb: undefined })] });
    const out = placeOne({ gpus: 1, min_gpu_memory_gb: 40 }, [node]);
    expect(out.placement?.shards[0]?.gpuIndices).toEqual([0]);
    expect(out.notes.map((n) => n.note)).toEqual(['GPU 0 memory unknown (agent did not report it); min_gpu_memory_gb 40 not checked']);
  });

  it('cordoned, draining and silent nodes get nothing', () => {
    const out = placeOne({}, [
      makeNode({ id: 'a', admin: 'cordoned' }),
      makeNode({ id: 'b', admin: 'draining' }),
      makeNode({ id: 'c', liveness: 'not-ready' }),
      makeNode({ id: 'd', liveness: 'lost' }),
    ]);
    expect(out.placement).toBeUndefined();
    expect(out.summary).toBe('0/4 nodes can run qwen-coder-14b: 2 not reporting, 1 cordoned, 1 draining');
  });
});

describe('place: choosing among fitting nodes', () => {
  it('spreads a model over nodes before packing', () => {
    const nodes = [makeNode({ id: 'a' }), makeNode({ id: 'b' })];
    expect(placeOne({}, nodes, { existingOnNode: { a: 1 } }).placement?.shards[0]?.nodeId).toBe('b');
    expect(placeOne({}, nodes, { existingOnNode: new Map([['b', 2]]) }).placement?.shards[0]?.nodeId).toBe('a');
  });

  it('derives the spread from reservations of the same model when not given', () => {
    const nodes = [makeNode({ id: 'a' }), makeNode({ id: 'b' })];
    const out = placeOne({}, nodes, {
      reservations: [
        makeReservation({ nodeId: 'a', model: 'qwen-coder-14b' }),
        makeReservation({ nodeId: 'b', model: 'another' }),
        makeReservation({ nodeId: 'b', model: 'another', replicaId: 'r-2' }),
      ],
    });
    expect(out.placement?.shards[0]?.nodeId).toBe('b');
  });

  it('avoids nodes in avoidNodes while anything else fits, and uses them when nothing else does', () => {
    const nodes = [makeNode({ id: 'a' }), makeNode({ id: 'b', admin: 'cordoned' }), makeNode({ id: 'c' })];
    expect(placeOne({}, nodes, { avoidNodes: ['a'] }).placement?.shards[0]?.nodeId).toBe('c');
    expect(placeOne({}, nodes, { avoidNodes: ['a', 'c'] }).placement?.shards[0]?.nodeId).toBe('a');
  });

  it('packs GPUs: the node with the fewest free GPUs that still fits', () => {
    const nodes = [makeH100Node('full-8'), makeH100Node('part-3', {}, 3), makeH100Node('small-1', {}, 1)];
    expect(placeOne({ gpus: 2 }, nodes).placement?.shards[0]?.nodeId).toBe('part-3');
  });

  it('sends CPU work to CPU nodes before idle GPU nodes, then to the tightest memory fit', () => {
    const nodes = [
      makeH100Node('gpu-1', { memoryTotalMb: 48 * GB }),
      makeNode({ id: 'cpu-big', memoryTotalMb: 256 * GB }),
      makeNode({ id: 'cpu-small', memoryTotalMb: 32 * GB }),
      makeNode({ id: 'cpu-tiny', memoryTotalMb: 16 * GB }),
    ];
    expect(placeOne({ min_memory_gb: 24 }, nodes).placement?.shards[0]?.nodeId).toBe('cpu-small');
  });

  it('breaks ties by node id, whatever the input order', () => {
    const nodes = [makeNode({ id: 'n-2' }), makeNode({ id: 'n-3' }), makeNode({ id: 'n-1' })];
    expect(placeOne({}, nodes).placement?.shards[0]?.nodeId).toBe('n-1');
    expect(placeOne({}, [...nodes].reverse()).placement?.shards[0]?.nodeId).toBe('n-1');
  });
});

describe('place: profiles in order', () => {
  const model = makeModel({
    profiles: [makeProfile({ name: 'gpu', engine: 'vllm', gpus: 1 }), makeProfile({ name: 'cpu', min_memory_gb: 24 })],
  });

  it('falls back to a later profile and keeps why the earlier did not fit', () => {
    const out = place({ model, nodes: [makeNode({ id: 'cpu-1' })], reservations: [] });
    expect(out.placement?.profile.name).toBe('cpu');
    expect(out.rejections).toEqual([
      {
        profile: 'gpu',
        pool: undefined,
        node: 'cpu-1',
        code: 'gpu_count',
        reason: 'has no GPUs',
        requested: 1,
        available: 0,
      },
    ]);
    expect(out.summary).toBe('placed qwen-coder-14b on cpu-1 (profile cpu; 1/1 nodes fit; gpu did not fit)');
  });

  it('takes the first profile that fits without explaining the winner', () => {
    const out = place({ model, nodes: [makeH100Node('g-1'), makeNode({ id: 'cpu-1' })], reservations: [] });
    expect(out.placement?.profile.name).toBe('gpu');
    expect(out.rejections).toEqual([]);
  });

  it('explains the winner too when asked', () => {
    const out = place({
      model,
      nodes: [makeH100Node('g-1'), makeNode({ id: 'cpu-1' })],
      reservations: [],
      explainWinner: true,
    });
    expect(out.placement?.shards[0]?.nodeId).toBe('g-1');
    expect(out.rejections.map(renderRejection)).toEqual(['cpu-1: has no GPUs']);
  });

  it('rejects with every profile and summarises the one that came closest', () => {
    const out = place({ model, nodes: [makeNode({ id: 'cpu-1', memoryTotalMb: 8 * GB })], reservations: [] });
    expect(out.placement).toBeUndefined();
    expect(out.rejections.map((r) => `${r.profile} ${renderRejection(r)}`)).toEqual(['gpu cpu-1: has no GPUs', 'cpu cpu-1: has 8 GiB of memory, needs 24']);
    expect(out.summary).toBe('0/1 nodes can run qwen-coder-14b (profile gpu): 1 without GPUs');
  });
});
