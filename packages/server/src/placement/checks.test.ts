import { describe, expect, it } from '@jest/globals';
import type { Profile } from '@llmgw/shared';
import { place } from './index.js';
import type { NodeSnapshot, Rejection } from '../snapshot.js';
import { GB, makeGpu, makeH100Node, makeModel, makeNode, makeProfile, makeReservation, makeRtx4090Node, reasonsFor } from '../../test/factories.js';
import { placeOne } from './testing.js';

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
      name: 'pending approval',
      profile: {},
      node: makeNode({ id: 'n9', admin: 'pending-approval' }),
      want: [{ code: 'pending_approval', reason: 'is waiting for approval (ctl nodes approve n9)' }],
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
      name: 'engine: command on an agent that does not allow it',
      profile: { engine: 'command', command: ['my-engine'] },
      node: makeNode({ id: 'node-3', allowsCommandEngine: false }),
      want: [{ code: 'command_engine', reason: 'does not allow engine: command (start its agent with --allow-command-engine)' }],
    },
    {
      name: 'host memory',
      profile: { min_memory_gb: 24 },
      node: makeNode({ memoryTotalMb: 8 * GB }),
      want: [{ code: 'memory', reason: 'has 8 GiB of memory, needs 24', requested: 24, available: 8 }],
    },
    {
      name: 'host memory held by reservations',
      profile: { min_memory_gb: 24 },
      node: makeNode({ memoryTotalMb: 64 * GB }),
      reservations: [makeReservation({ replicaId: 'a', memoryMb: 24 * GB }), makeReservation({ replicaId: 'b', memoryMb: 24 * GB })],
      want: [
        {
          code: 'memory',
          reason: 'has 64 GiB of memory, 48 reserved by 2 replicas, needs 24',
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
      want: [{ code: 'memory', reason: 'has 32 GiB of memory, 24 reserved by 1 replica, needs 24' }],
    },
    {
      name: 'CPU cores',
      profile: { min_cpu_cores: 16 },
      node: makeNode({ cpuCores: 4 }),
      want: [{ code: 'cpu_cores', reason: 'has 4 CPU cores, needs 16', requested: 16, available: 4 }],
    },
    {
      name: 'one CPU core',
      profile: { min_cpu_cores: 2 },
      node: makeNode({ cpuCores: 1 }),
      want: [{ code: 'cpu_cores', reason: 'has 1 CPU core, needs 2', requested: 2, available: 1 }],
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
      want: [{ code: 'gpu_class', reason: 'has RTX-4090 GPUs, needs H100', requested: 'H100', available: 'RTX-4090' }],
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
      want: [{ code: 'gpu_memory', reason: 'has 24 GiB GPUs, needs 40', requested: 40, available: 24 }],
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
      'has 8 GiB of memory, needs 24',
      'has no GPUs',
    ]);
    expect(out.summary).toBe('0/1 nodes can run qwen-coder-14b: 1 not reporting');
  });

  it('names the GPU class and the host memory both', () => {
    const node = makeRtx4090Node('b-1', { memoryTotalMb: 16 * GB });
    const out = placeOne({ gpus: 1, gpu_class: ['H100'], min_memory_gb: 32 }, [node]);
    expect(reasonsFor(out.rejections, 'b-1')).toEqual(['has 16 GiB of memory, needs 32', 'has RTX-4090 GPUs, needs H100']);
  });
});

describe('place: engine: command', () => {
  it('goes to a node whose agent allows it (or does not say, as older agents), and is counted in the summary', () => {
    const refusing = makeNode({ id: 'a', allowsCommandEngine: false });
    const cmd = { engine: 'command' as const, command: ['my-engine'] };
    expect(placeOne(cmd, [refusing, makeNode({ id: 'b', allowsCommandEngine: true })]).placement?.shards[0]?.nodeId).toBe('b');
    expect(placeOne(cmd, [refusing, makeNode({ id: 'c' })]).placement?.shards[0]?.nodeId).toBe('c');
    // Other engines do not care.
    expect(placeOne({}, [refusing]).placement?.shards[0]?.nodeId).toBe('a');
    const out = placeOne(cmd, [refusing, makeNode({ id: 'd', allowsCommandEngine: false })]);
    expect(out.summary).toBe('0/2 nodes can run qwen-coder-14b: 2 do not allow engine: command');
    expect(out.reasons).toEqual([{ code: 'command_engine', count: 2 }]);
  });
});

describe('place: CPU cores', () => {
  it('a node with enough cores fits; one that did not report them fits with a note', () => {
    expect(placeOne({ min_cpu_cores: 16 }, [makeNode({ cpuCores: 16 })]).placement?.shards[0]?.nodeId).toBe('node-1');
    const out = placeOne({ min_cpu_cores: 16 }, [makeNode({ id: 'a', cpuCores: 4 }), makeNode({ id: 'b' })]);
    expect(out.placement?.shards[0]?.nodeId).toBe('b');
    expect(out.notes).toEqual([{ profile: 'cpu', node: 'b', note: 'CPU cores unknown (agent did not report them); min_cpu_cores 16 not checked' }]);
  });

  it('is counted in the summary and its reasons', () => {
    const out = placeOne({ min_cpu_cores: 16 }, [makeNode({ id: 'a', cpuCores: 4 }), makeNode({ id: 'b', cpuCores: 8 })]);
    expect(out.summary).toBe('0/2 nodes can run qwen-coder-14b: 2 too few CPU cores');
    expect(out.reasons).toEqual([{ code: 'cpu_cores', count: 2 }]);
  });
});
