import type { GpuReport, Model, NodeReport, Profile } from '@llmgw/shared';
import type { Replica } from '../src/domain.js';
import type { ServerSettings } from '../src/server.js';
import { defaultTuning } from '../src/settings.js';
import type { Store, StoredKey, StoredToken, UsageDelta } from '../src/store/store.js';
import type { NodeSnapshot, PlacementOutcome, Rejection, Reservation } from '../src/snapshot.js';
import { place, type PlaceInput } from '../src/placement/index.js';

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
export function makeH100Node(
  id: string,
  overrides: Partial<NodeSnapshot> = {},
  count = 8,
): NodeSnapshot {
  return makeNode({
    id,
    memoryTotalMb: 1024 * 1024,
    gpus: Array.from({ length: count }, (_, i) => makeGpu({ index: i, uuid: `${id}-gpu-${i}` })),
    fabrics: ['nvlink', 'infiniband', 'ethernet'],
    ...overrides,
  });
}

/** A node with `count` RTX 4090s (24 GB each; 2 by default). */
export function makeRtx4090Node(
  id: string,
  overrides: Partial<NodeSnapshot> = {},
  count = 2,
): NodeSnapshot {
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

/**
 * A store in memory: keys kept, usage recorded in `usage`, replicas loaded from the list
 * given; every other write is dropped. Override a method to make it fail.
 */
export function memoryStore(o: { replicas?: Replica[] } & Partial<Store> = {}): Store & { usage: UsageDelta[] } {
  const { replicas = [], ...overrides } = o;
  const keys = new Map<string, StoredKey>();
  const tokens = new Map<string, StoredToken>();
  const usage: UsageDelta[] = [];
  return {
    kind: 'sqlite',
    usage,
    loadNodes: async () => [],
    saveNodeAdmin: async () => {},
    saveNodeReports: async () => {},
    deleteNode: async () => {},
    loadCredentials: async () => [],
    addCredential: async () => true,
    loadReplicas: async () => replicas,
    loadRollouts: async () => [],
    saveRolloutHistory: async () => {},
    saveRolloutControl: async () => {},
    writeReplicas: async () => {},
    loadKeys: async () => [...keys.values()],
    saveKey: async (k) => void keys.set(k.id, k),
    addUsage: async (ds) => void usage.push(...ds.map((d) => ({ ...d }))),
    loadUsage: async () => [],
    addEvents: async (es) => [...es],
    loadEvents: async () => [],
    loadTokens: async () => [...tokens.values()],
    saveToken: async (t) => void tokens.set(t.id, t),
    probe: async () => {},
    close: async () => {},
    ...overrides,
  };
}

/** Places one replica of a one-profile model over `nodes`, nothing reserved unless `extra` says. */
export function placeOne(profile: Partial<Profile>, nodes: NodeSnapshot[], extra: Partial<PlaceInput> = {}): PlacementOutcome {
  return place({ model: makeModel({ profiles: [makeProfile(profile)] }), nodes, reservations: [], ...extra });
}

/** The reasons recorded against one node, in check order. */
export function reasonsFor(rejections: Rejection[], node: string): string[] {
  return rejections.filter((r) => r.node === node).map((r) => r.reason);
}

/** MB in a GB, for memory figures in tests: `8 * GB` is 8 GB in MB. */
export const GB = 1024;

/** Settings for a server started in a test: loopback on port 0, short timers; override what the test is about. */
export function makeServerSettings(dataDir: string, overrides: Partial<ServerSettings> = {}): ServerSettings {
  return {
    ...defaultTuning(),
    clientAddr: '127.0.0.1:0',
    adminAddr: '127.0.0.1:0',
    adminToken: 'admin',
    joinToken: 'join',
    dataDir,
    notReadyAfterMs: 600_000,
    lostAfterMs: 3_600_000,
    reconcileIntervalMs: 60_000,
    failedBackoffMs: 30_000,
    maxBodyBytes: 1 << 20,
    upstreamTimeoutMs: 5000,
    cooldownMs: 1000,
    keepAliveMs: 200,
    drainParallel: 1,
    minHealthyMs: 0,
    drainTimeoutMs: 5000,
    maxLostFraction: 0.5,
    coldStartTimeoutMs: 3000,
    streamIdleTimeoutMs: 60_000,
    ...overrides,
  };
}
