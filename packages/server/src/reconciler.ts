import type { Model } from '@llmgw/shared';
import { gbToMb } from '@llmgw/shared';
import { ACTIVE_REPLICA_STATES, HOLDS_RESOURCES, type Replica } from './domain.js';
import { place } from './placement.js';
import type { NodeSnapshot, PlacementOutcome, Reservation } from './snapshot.js';

export interface ReconcileInput {
  models: Model[];
  nodes: NodeSnapshot[];
  replicas: Replica[];
  nowMs: number;
  /** Injected so the function stays pure: ids and keys come from the caller. */
  newReplica: (model: string) => { id: string; apiKey: string; masterPort: number };
  /** How long a failed replica keeps its slot before it is replaced. */
  failedBackoffMs: (replica: Replica) => number;
}

export interface ReconcileResult {
  create: Replica[];
  /** Replicas to stop and forget, with why. */
  remove: { id: string; reason: string }[];
  /** The last placement attempt per model, for `explain`. */
  attempts: Map<string, PlacementOutcome>;
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

/**
 * Level-triggered reconciliation: compares the catalog's wishes with the replicas that
 * exist and says what to create and what to remove. Pure: the caller applies the result
 * and persists it, so the same input always gives the same answer and tests need no
 * server.
 */
export function reconcile(input: ReconcileInput): ReconcileResult {
  const result: ReconcileResult = { create: [], remove: [], attempts: new Map() };
  const byName = new Map(input.models.map((m) => [m.name, m]));
  const live: Replica[] = [];

  for (const r of input.replicas) {
    const model = byName.get(r.model);
    if (!model) {
      result.remove.push({ id: r.id, reason: `model ${r.model} is no longer in the catalog` });
      continue;
    }
    if (!model.profiles.some((p) => p.name === r.profile)) {
      result.remove.push({ id: r.id, reason: `profile ${r.profile} is no longer in model ${r.model}` });
      continue;
    }
    if (r.state === 'failed' && input.nowMs - r.createdAtMs >= input.failedBackoffMs(r)) {
      result.remove.push({ id: r.id, reason: `replaced after failing: ${r.error ?? 'unknown error'}` });
      continue;
    }
    live.push(r);
  }

  const reservations = reservationsOf(live);
  for (const model of input.models) {
    const mine = live.filter((r) => r.model === model.name);
    // A failed replica keeps its slot during its backoff so a crash loop does not
    // become a replica-creation loop.
    const counted = mine.filter((r) => ACTIVE_REPLICA_STATES.has(r.state) || r.state === 'failed').length;
    const target = model.scaling?.min ?? 1;
    let missing = target - counted;
    if (missing <= 0) continue;

    const existingOnNode: Record<string, number> = {};
    for (const r of mine) for (const s of r.shards) existingOnNode[s.nodeId] = (existingOnNode[s.nodeId] ?? 0) + 1;
    const avoidNodes = mine.filter((r) => r.state === 'failed').flatMap((r) => r.shards.map((s) => s.nodeId));

    while (missing > 0) {
      const outcome = place({ model, nodes: input.nodes, reservations, existingOnNode, avoidNodes });
      result.attempts.set(model.name, outcome);
      const p = outcome.placement;
      if (!p) break;
      const ids = input.newReplica(model.name);
      const memoryMb = gbToMb(p.profile.min_memory_gb ?? 0);
      const replica: Replica = {
        id: ids.id,
        model: model.name,
        profile: p.profile.name,
        state: 'pending',
        ...(p.pool ? { pool: p.pool } : {}),
        ...(p.fabric ? { fabric: p.fabric } : {}),
        createdAtMs: input.nowMs,
        memoryMb,
        apiKey: ids.apiKey,
        ...(p.shards.length > 1 ? { masterPort: ids.masterPort } : {}),
        shards: p.shards.map((s) => ({
          id: `${ids.id}-${s.rank}`,
          nodeId: s.nodeId,
          rank: s.rank,
          gpuUuids: s.gpuUuids,
          gpuIndices: s.gpuIndices,
          state: 'pending',
        })),
      };
      result.create.push(replica);
      for (const s of replica.shards) {
        reservations.push({ replicaId: replica.id, model: model.name, nodeId: s.nodeId, memoryMb, gpuUuids: s.gpuUuids });
        existingOnNode[s.nodeId] = (existingOnNode[s.nodeId] ?? 0) + 1;
      }
      missing--;
    }
  }
  return result;
}
