import type { GpuReport, Model, NodeReport, Profile } from '@llmgw/shared';
import type { Replica } from '../src/domain.js';
import type { NodeSnapshot, Rejection, Reservation } from '../src/snapshot.js';

/**
 * Test factories: each returns a complete, valid object describing the common case, and
 * a test states only what it is about through `overrides`.
 */

/** A healthy H100 80GB; its UUID follows its index unless overridden. */
export function makeGpu(overrides: Partial<GpuReport> = {}): GpuReport {
  const index = overrides.index ?? 0;
  return {
    index,
    uuid: `GPU-${index}`,
    name: 'NVIDIA H100 80GB HBM3',
    class: 'H100-80GB',
    memory_total_mb: 81920,
    memory_used_mb: 0,
    problems: [],
    ...overrides,
  };
}

/** A ready, live CPU node with 64 GB of memory and no GPUs. */
export function makeNode(overrides: Partial<NodeSnapshot> = {}): NodeSnapshot {
  return {
    id: 'node-1',
    labels: {},
    admin: 'ready',
    liveness: 'ready',
    lastSeenAgoS: 2,
    memoryTotalMb: 64 * 1024,
    gpus: [],
    fabrics: ['ethernet'],
    ...overrides,
  };
}

/** A node with `count` H100-80GB GPUs (8 by default), UUIDs unique across nodes. */
export function makeH100Node(id: string, overrides: Partial<NodeSnapshot> = {}, count = 8): NodeSnapshot {
  return makeNode({
    id,
    memoryTotalMb: 1024 * 1024,
    gpus: Array.from({ length: count }, (_, i) => makeGpu({ index: i, uuid: `${id}-gpu-${i}` })),
    fabrics: ['nvlink', 'infiniband', 'ethernet'],
    ...overrides,
  });
}

/** A node with `count` RTX 4090s (24 GB each; 2 by default). */
export function makeRtx4090Node(id: string, overrides: Partial<NodeSnapshot> = {}, count = 2): NodeSnapshot {
  return makeNode({
    id,
    memoryTotalMb: 128 * 1024,
    gpus: Array.from({ length: count }, (_, i) =>
      makeGpu({
        index: i,
        uuid: `${id}-gpu-${i}`,
        name: 'NVIDIA GeForce RTX 4090',
        class: 'RTX-4090',
        memory_total_mb: 24564,
      }),
    ),
    ...overrides,
  });
}

/** A CPU profile with no requirements: fits any ready node. */
export function makeProfile(overrides: Partial<Profile> = {}): Profile {
  return { name: 'cpu', engine: 'llama.cpp', ...overrides };
}

export function makeModel(overrides: Partial<Model> = {}): Model {
  return {
    name: 'qwen-coder-14b',
    source: 'Qwen/Qwen2.5-Coder-14B-Instruct',
    profiles: [makeProfile()],
    ...overrides,
  };
}

export function makeReservation(overrides: Partial<Reservation> = {}): Reservation {
  return {
    replicaId: 'r-1',
    model: 'other-model',
    nodeId: 'node-1',
    memoryMb: 0,
    gpuUuids: [],
    ...overrides,
  };
}

/** A replica as the controller keeps it; one CPU shard on `node-1` unless overridden. */
export function makeReplica(overrides: Partial<Replica> = {}): Replica {
  const id = overrides.id ?? 'r-1';
  return {
    id,
    model: 'qwen-coder-14b',
    profile: 'cpu',
    state: 'ready',
    createdAtMs: 0,
    memoryMb: 0,
    apiKey: 'k',
    shards: [{ id: `${id}-0`, nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }],
    ...overrides,
  };
}

/** A node report as an agent sends it; no memory, GPUs or fabrics unless overridden. */
export function makeReport(overrides: Partial<NodeReport> = {}): NodeReport {
  const id = overrides.node_id ?? 'node-1';
  return { node_id: id, hostname: id, mgmt_addr: '10.0.0.1', agent_version: 'test', labels: {}, gpus: [], fabrics: [], ...overrides };
}

/** The reasons recorded against one node, in check order. */
export function reasonsFor(rejections: Rejection[], node: string): string[] {
  return rejections.filter((r) => r.node === node).map((r) => r.reason);
}

/** MB in a GB, for memory figures in tests: `8 * GB` is 8 GB in MB. */
export const GB = 1024;

/**
 * A report of exactly `bytes` bytes as JSON, within every field bound of the schema: GPUs
 * full of problems (the shape of issue 27's flood), then labels to make up the rest.
 */
export function makeReportOfBytes(id: string, bytes: number, overrides: Partial<NodeReport> = {}): NodeReport {
  const problems = Array.from({ length: 16 }, (_, i) => `p${i}`.padEnd(256, '.'));
  const gpus: NodeReport['gpus'] = [];
  const size = (r: NodeReport) => Buffer.byteLength(JSON.stringify(r));
  const report = makeReport({ node_id: id, hostname: id, ...overrides, gpus });
  while (gpus.length < 64 && size(report) + 4400 < bytes) gpus.push({ index: gpus.length, name: 'NVIDIA H100', class: 'H100-80GB', problems });
  for (let i = 0, left = bytes - size(report); left > 0; i++, left = bytes - size(report)) {
    const overhead = `,"l${i}":""`.length - (i === 0 ? 1 : 0);
    // The last label takes what is left exactly; one before it leaves room for another key.
    const value = left - overhead <= 1024 ? left - overhead : Math.min(1024, left - overhead - 16);
    if (value < 0) throw new Error(`cannot make a report of exactly ${bytes} bytes`);
    report.labels[`l${i}`] = 'v'.repeat(value);
  }
  if (size(report) !== bytes) throw new Error(`made a report of ${size(report)} bytes, not ${bytes}`);
  return report;
}
