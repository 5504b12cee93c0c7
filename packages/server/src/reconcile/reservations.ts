import { HOLDS_RESOURCES, type Replica } from '../domain.js';
import type { Reservation } from '../snapshot.js';

/**
 * Resources held by replicas that are placed and not yet stopped. The one place
 * reconcile (and the node views) sum reservations from replicas.
 */
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
