import { describe, expect, it } from '@jest/globals';
import {
  DEFAULT_POOL,
  indexReservations,
  place,
  placeMany,
  placeOnFleet,
  prepareFleet,
  reserve,
  renderRejection,
  reservationsFor,
  summarize,
  type PlaceInput,
} from './index.js';
import type { NodeSnapshot, Rejection } from '../snapshot.js';
import {
  makeGpu,
  makeH100Node,
  makeModel,
  makeNode,
  makeProfile,
  makeReservation,
  makeRtx4090Node,
} from '../../test/factories.js';
import type { Profile } from '@llmgw/shared';

const GB = 1024;

function placeOne(profile: Partial<Profile>, nodes: NodeSnapshot[], extra: Partial<PlaceInput> = {}) {
  return place({ model: makeModel({ profiles: [makeProfile(profile)] }), nodes, reservations: [], ...extra });
}

/** The reasons recorded against one node, in check order. */
function reasonsFor(rejections: Rejection[], node: string): string[] {
  return rejections.filter((r) => r.node === node).map((r) => r.reason);
}

describe('place: one check at a time', () => {
  const cases: {
    name: string;
    profile: Partial<Profile>;
    node: NodeSnapshot;
    reservations?: ReturnType<typeof makeReservation>[];
    want: Partial<Rejection>[];
  }[] = [
    {
      name: 'liveness',
      profile: {},
      node: makeNode({ liveness: 'not-ready', lastSeenAgoS: 45.4 }),
      want: [{ code: 'not_ready', reason: 'has not reported for 45s' }],
    },
    {
      name: 'lost counts as not reporting',
      profile: {},
      node: makeNode({ liveness: 'lost', lastSeenAgoS: 600 }),
      want: [{ code: 'not_ready', reason: 'has not reported for 600s' }],
    },
    {
      name: 'cordoned',
      profile: {},
      node: makeNode({ admin: 'cordoned' }),
      want: [{ code: 'cordoned', reason: 'is cordoned' }],
    },
    {
      name: 'cordoned with a reason',
      profile: {},
      node: makeNode({ admin: 'cordoned', adminReason: 'maintenance: PSU swap' }),
      want: [{ code: 'cordoned', reason: 'is cordoned (maintenance: PSU swap)' }],
    },
    {
      name: 'draining',
      profile: {},
      node: makeNode({ admin: 'draining' }),
      want: [{ code: 'draining', reason: 'is draining' }],
    },
    {
      name: 'missing label',
      profile: { node_selector: { role: 'coding' } },
      node: makeNode(),
      want: [{ code: 'label', reason: 'lacks label role=coding', requested: 'role=coding', available: undefined }],
    },
    {
      name: 'different label value',
      profile: { node_selector: { role: 'coding' } },
      node: makeNode({ labels: { role: 'batch' } }),
      want: [
        {
          code: 'label',
          reason: 'has label role=batch, needs role=coding',
          requested: 'role=coding',
          available: 'role=batch',
        },
      ],
    },
    {
      name: 'host memory',
      profile: { min_memory_gb: 24 },
      node: makeNode({ memoryTotalMb: 8 * GB }),
      want: [{ code: 'memory', reason: 'has 8 GB of memory, needs 24', requested: 24, available: 8 }],
    },
    {
      name: 'host memory held by reservations',
      profile: { min_memory_gb: 24 },
      node: makeNode({ memoryTotalMb: 64 * GB }),
      reservations: [
        makeReservation({ replicaId: 'a', memoryMb: 24 * GB }),
        makeReservation({ replicaId: 'b', memoryMb: 24 * GB }),
      ],
      want: [
        {
          code: 'memory',
          reason: 'has 64 GB of memory, 48 reserved by 2 replicas, needs 24',
          requested: 24,
          available: 16,
        },
      ],
    },
    {
      name: 'host memory held by one replica',
      profile: { min_memory_gb: 24 },
      node: makeNode({ memoryTotalMb: 32 * GB }),
      reservations: [makeReservation({ memoryMb: 24 * GB })],
      want: [{ code: 'memory', reason: 'has 32 GB of memory, 24 reserved by 1 replica, needs 24' }],
    },
    {
      name: 'one free GPU, two needed',
      profile: { gpus: 2 },
      node: makeH100Node('node-1', {}, 1),
      want: [{ code: 'gpu_count', reason: 'has 1 free H100-80GB GPU, needs 2', requested: 2, available: 1 }],
    },
    {
      name: 'three free GPUs, four needed',
      profile: { gpus: 4 },
      node: makeH100Node('node-1', {}, 3),
      want: [{ code: 'gpu_count', reason: 'has 3 free H100-80GB GPUs, needs 4', requested: 4, available: 3 }],
    },
    {
      name: 'no GPUs at all',
      profile: { gpus: 1 },
      node: makeNode(),
      want: [{ code: 'gpu_count', reason: 'has no GPUs', requested: 1, available: 0 }],
    },
    {
      name: 'every GPU reserved',
      profile: { gpus: 2 },
      node: makeH100Node('node-1', {}, 2),
      reservations: [makeReservation({ gpuUuids: ['node-1-gpu-0', 'node-1-gpu-1'] })],
      want: [{ code: 'gpu_count', reason: 'has no free H100-80GB GPUs, needs 2', available: 0 }],
    },
    {
      name: 'GPU class',
      profile: { gpus: 1, gpu_class: ['H100'] },
      node: makeRtx4090Node('node-1'),
      want: [
        { code: 'gpu_class', reason: 'has RTX-4090 GPUs, needs H100', requested: 'H100', available: 'RTX-4090' },
      ],
    },
    {
      name: 'GPU class, several accepted',
      profile: { gpus: 1, gpu_class: ['H100', 'A100'] },
      node: makeRtx4090Node('node-1'),
      want: [{ code: 'gpu_class', reason: 'has RTX-4090 GPUs, needs H100 or A100' }],
    },
    {
      name: 'GPU memory',
      profile: { gpus: 1, min_gpu_memory_gb: 40 },
      node: makeRtx4090Node('node-1'),
      want: [{ code: 'gpu_memory', reason: 'has 24 GB GPUs, needs 40', requested: 40, available: 24 }],
    },
    {
      name: 'an unhealthy GPU that makes the node short',
      profile: { gpus: 2 },
      node: makeH100Node('node-1', {
        gpus: [makeGpu({ index: 0, uuid: 'u0' }), makeGpu({ index: 3, uuid: 'u3', problems: ['fell off the bus (Xid 79)'] })],
      }),
      want: [
        { code: 'gpu_health', reason: 'GPU 3 is unhealthy: fell off the bus (Xid 79)' },
        { code: 'gpu_count', reason: 'has 1 free H100-80GB GPU, needs 2' },
      ],
    },
    {
      name: 'an unhealthy GPU on a node short anyway is not named',
      profile: { gpus: 4 },
      node: makeH100Node('node-1', {
        gpus: [makeGpu({ index: 0, uuid: 'u0' }), makeGpu({ index: 1, uuid: 'u1', problems: ['3 uncorrectable ECC errors'] })],
      }),
      want: [{ code: 'gpu_count', reason: 'has 1 free H100-80GB GPU, needs 4' }],
    },
    {
      name: 'sharded profile without the fabric',
      profile: { shards: 2, fabric: 'infiniband' },
      node: makeNode({ pool: 'rack-a', fabrics: ['ethernet'] }),
      want: [
        { code: 'fabric', reason: 'lacks fabric infiniband', pool: 'rack-a', requested: 'infiniband', available: 'ethernet' },
        { code: 'shards', reason: 'pool rack-a: fits 0 of 2 shards', pool: 'rack-a', node: undefined },
      ],
    },
  ];

  it.each(cases)('$name', ({ profile, node, reservations, want }) => {
    const out = place({
      model: makeModel({ profiles: [makeProfile(profile)] }),
      nodes: [node],
      reservations: reservations ?? [],
    });
    expect(out.placement).toBeUndefined();
    expect(out.rejections).toHaveLength(want.length);
    want.forEach((w, i) => expect(out.rejections[i]).toMatchObject({ profile: 'cpu', ...w }));
    for (const r of out.rejections) if (r.code !== 'shards') expect(r.node).toBe(node.id);
  });
});

describe('place: every failing reason of a node is kept', () => {
  it('does not stop at the first failure', () => {
    const node = makeNode({
      liveness: 'not-ready',
      lastSeenAgoS: 90,
      admin: 'cordoned',
      adminReason: 'maintenance: PSU swap',
      memoryTotalMb: 8 * GB,
      labels: { role: 'batch' },
    });
    const out = placeOne({ node_selector: { role: 'coding', tier: 'gold' }, min_memory_gb: 24, gpus: 1 }, [node]);
    expect(reasonsFor(out.rejections, 'node-1')).toEqual([
      'has not reported for 90s',
      'is cordoned (maintenance: PSU swap)',
      'has label role=batch, needs role=coding',
      'lacks label tier=gold',
      'has 8 GB of memory, needs 24',
      'has no GPUs',
    ]);
    expect(out.summary).toBe('0/1 nodes can run qwen-coder-14b: 1 not reporting');
  });

  it('names the GPU class and the host memory both', () => {
    const node = makeRtx4090Node('b-1', { memoryTotalMb: 16 * GB });
    const out = placeOne({ gpus: 1, gpu_class: ['H100'], min_memory_gb: 32 }, [node]);
    expect(reasonsFor(out.rejections, 'b-1')).toEqual([
      'has 16 GB of memory, needs 32',
      'has RTX-4090 GPUs, needs H100',
    ]);
  });
});

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
    expect(out.placement?.shards[0].nodeId).toBe('node-1');
    expect(out.notes).toEqual([
      {
        profile: 'cpu',
        node: 'node-1',
        note: 'memory unknown (agent did not report it); min_memory_gb 24 not checked',
      },
    ]);
  });

  it('prefers a node known to fit over one whose memory is unknown', () => {
    const out = placeOne({ min_memory_gb: 24 }, [
      makeNode({ id: 'a-unknown', memoryTotalMb: undefined }),
      makeNode({ id: 'z-known', memoryTotalMb: 32 * GB }),
    ]);
    expect(out.placement?.shards[0].nodeId).toBe('z-known');
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
    expect(out.placement?.shards[0].gpuIndices).toEqual([0]);
    expect(out.notes.map((n) => n.note)).toEqual([
      'GPU 0 memory unknown (agent did not report it); min_gpu_memory_gb 40 not checked',
    ]);
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
    expect(outcomes.map((o) => o.placement?.shards[0].nodeId)).toEqual(['a', 'b', undefined]);
    expect(reservations).toEqual([
      { replicaId: 'r1', model: model.name, nodeId: 'a', memoryMb: 24 * GB, gpuUuids: [] },
      { replicaId: 'r2', model: model.name, nodeId: 'b', memoryMb: 24 * GB, gpuUuids: [] },
    ]);
    expect(outcomes[2].rejections.map(renderRejection)).toEqual([
      'a: has 32 GB of memory, 24 reserved by 1 replica, needs 24',
      'b: has 32 GB of memory, 24 reserved by 1 replica, needs 24',
    ]);
    expect(outcomes[2].summary).toBe('0/2 nodes can run qwen-coder-14b: 2 too little memory');
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
    expect(first.placement?.shards[0].nodeId).toBe('a');
    reserve(fleet, reservationsFor(first.placement!, 'r1', model.name));
    const second = placeOnFleet(fleet, model);
    expect(second.rejections.map(renderRejection)).toEqual([
      'a: has 32 GB of memory, 24 reserved by 1 replica, needs 24',
      'b: is cordoned',
    ]);
    // Something else holds memory on the cordoned node: its explanation follows.
    reserve(fleet, [makeReservation({ replicaId: 'x', nodeId: 'b', memoryMb: 16 * GB })]);
    expect(placeOnFleet(fleet, model).rejections.map(renderRejection)).toEqual([
      'a: has 32 GB of memory, 24 reserved by 1 replica, needs 24',
      'b: is cordoned',
      'b: has 32 GB of memory, 16 reserved by 1 replica, needs 24',
    ]);
  });
});

describe('place: choosing among fitting nodes', () => {
  it('spreads a model over nodes before packing', () => {
    const nodes = [makeNode({ id: 'a' }), makeNode({ id: 'b' })];
    expect(placeOne({}, nodes, { existingOnNode: { a: 1 } }).placement?.shards[0].nodeId).toBe('b');
    expect(placeOne({}, nodes, { existingOnNode: new Map([['b', 2]]) }).placement?.shards[0].nodeId).toBe('a');
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
    expect(out.placement?.shards[0].nodeId).toBe('b');
  });

  it('avoids nodes in avoidNodes while anything else fits, and uses them when nothing else does', () => {
    const nodes = [makeNode({ id: 'a' }), makeNode({ id: 'b', admin: 'cordoned' }), makeNode({ id: 'c' })];
    expect(placeOne({}, nodes, { avoidNodes: ['a'] }).placement?.shards[0].nodeId).toBe('c');
    expect(placeOne({}, nodes, { avoidNodes: ['a', 'c'] }).placement?.shards[0].nodeId).toBe('a');
  });

  it('packs GPUs: the node with the fewest free GPUs that still fits', () => {
    const nodes = [makeH100Node('full-8'), makeH100Node('part-3', {}, 3), makeH100Node('small-1', {}, 1)];
    expect(placeOne({ gpus: 2 }, nodes).placement?.shards[0].nodeId).toBe('part-3');
  });

  it('sends CPU work to CPU nodes before idle GPU nodes, then to the tightest memory fit', () => {
    const nodes = [
      makeH100Node('gpu-1', { memoryTotalMb: 48 * GB }),
      makeNode({ id: 'cpu-big', memoryTotalMb: 256 * GB }),
      makeNode({ id: 'cpu-small', memoryTotalMb: 32 * GB }),
      makeNode({ id: 'cpu-tiny', memoryTotalMb: 16 * GB }),
    ];
    expect(placeOne({ min_memory_gb: 24 }, nodes).placement?.shards[0].nodeId).toBe('cpu-small');
  });

  it('breaks ties by node id, whatever the input order', () => {
    const nodes = [makeNode({ id: 'n-2' }), makeNode({ id: 'n-3' }), makeNode({ id: 'n-1' })];
    expect(placeOne({}, nodes).placement?.shards[0].nodeId).toBe('n-1');
    expect(placeOne({}, [...nodes].reverse()).placement?.shards[0].nodeId).toBe('n-1');
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
    expect(out.placement?.shards[0].nodeId).toBe('g-1');
    expect(out.rejections.map(renderRejection)).toEqual(['cpu-1: has no GPUs']);
  });

  it('rejects with every profile and summarises the one that came closest', () => {
    const out = place({ model, nodes: [makeNode({ id: 'cpu-1', memoryTotalMb: 8 * GB })], reservations: [] });
    expect(out.placement).toBeUndefined();
    expect(out.rejections.map((r) => `${r.profile} ${renderRejection(r)}`)).toEqual([
      'gpu cpu-1: has no GPUs',
      'cpu cpu-1: has 8 GB of memory, needs 24',
    ]);
    expect(out.summary).toBe('0/1 nodes can run qwen-coder-14b (profile gpu): 1 without GPUs');
  });
});

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
    expect(outcomes.map((o) => o.placement?.shards.map((s) => s.gpuIndices.join('')))).toEqual([
      ['0123', '0123'],
      ['4567', '4567'],
      undefined,
    ]);
  });
});

describe('summarize', () => {
  it('matches the DESIGN example', () => {
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
    expect(line).toBe(
      '9/9 nodes can run m: pool p1: fits 3 of 4 shards, pool p2: fits 3 of 4 shards, pool p3: fits 3 of 4 shards, 2 more pools',
    );
  });
});

describe('renderRejection', () => {
  it('prefixes the node, and leaves pool lines alone', () => {
    expect(
      renderRejection({ profile: 'cpu', node: 'node-7', code: 'memory', reason: 'has 8 GB of memory, needs 24' }),
    ).toBe('node-7: has 8 GB of memory, needs 24');
    expect(renderRejection({ profile: 'tp2', pool: 'rack-a', code: 'shards', reason: 'pool rack-a: fits 1 of 2 shards' })).toBe(
      'pool rack-a: fits 1 of 2 shards',
    );
  });
});
