import { gbToMb } from '@llmgw/shared';
import type { Profile } from '@llmgw/shared';
import { HOLDS_RESOURCES, type Replica } from '../domain.js';
import type { Placement, Reservation } from '../snapshot.js';

/**
 * Reservations: what replicas already placed hold on each node. Placement subtracts them
 * from what a node has, the admin views show them, and the reconciler derives them from
 * its replicas; all three sum them here, so "reserved" means one thing.
 */

/** What the replicas already placed hold on one node. */
export interface NodeUsage {
  memoryMb: number;
  gpuUuids: Set<string>;
  /** Distinct replicas with a shard here (for "48 reserved by 2 replicas"). */
  replicas: Set<string>;
  /** Shards per model name, for spreading a model's replicas. */
  models: Map<string, number>;
}

/** Node id → what is held there. */
export type ReservationIndex = Map<string, NodeUsage>;

/** Sums reservations per node, so each node costs one lookup rather than a scan. */
export function indexReservations(reservations: Iterable<Reservation>): ReservationIndex {
  const index: ReservationIndex = new Map();
  for (const r of reservations) addReservation(index, r);
  return index;
}

/** Adds one reservation to its node's sums; returns those sums. */
export function addReservation(index: ReservationIndex, r: Reservation): NodeUsage {
  let u = index.get(r.nodeId);
  if (u === undefined) {
    u = { memoryMb: 0, gpuUuids: new Set(), replicas: new Set(), models: new Map() };
    index.set(r.nodeId, u);
  }
  u.memoryMb += r.memoryMb;
  for (const g of r.gpuUuids) u.gpuUuids.add(g);
  u.replicas.add(r.replicaId);
  u.models.set(r.model, (u.models.get(r.model) ?? 0) + 1);
  return u;
}

/** Host memory a replica of `profile` holds on each of its nodes while it is placed. */
export function reservedMemoryMb(profile: Profile): number {
  return gbToMb(profile.min_memory_gb ?? 0);
}

/** The reservations a placement holds once it is accepted: one per shard. */
export function reservationsFor(placement: Placement, replicaId: string, model: string): Reservation[] {
  const memoryMb = reservedMemoryMb(placement.profile);
  return placement.shards.map((s) => ({
    replicaId,
    model,
    nodeId: s.nodeId,
    memoryMb,
    gpuUuids: s.gpuUuids,
  }));
}

/** Resources held by replicas that are placed and not yet stopped. */
export function reservationsOf(replicas: Iterable<Replica>): Reservation[] {
  const out: Reservation[] = [];
  for (const r of replicas) {
    if (!HOLDS_RESOURCES.has(r.state)) continue;
    for (const s of r.shards) {
      out.push({ replicaId: r.id, model: r.model, nodeId: s.nodeId, memoryMb: r.memoryMb, gpuUuids: s.gpuUuids });
    }
  }
  return out;
}
