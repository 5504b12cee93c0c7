import { randomUUID } from 'node:crypto';
import type { Model } from '@llmgw/shared';
import type { Logger } from 'pino';
import { HOLDS_RESOURCES, type Replica } from '../domain.js';
import type { Decision } from '../domain.js';
import type { PlannedAction, PlannedReplica } from '../reconcile/reconcile.js';
import { specOf } from '../reconcile/spec.js';
import type { StoredReplica } from '../store/store.js';
import type { EngineKeyOf } from './engine-keys.js';

/** What a planned replica gets when the plan is applied. */
export interface ReplicaIds {
  id: string;
  apiKey: string;
  /** Only for a multi-node replica: its ranks meet at rank 0 on this port. */
  masterPort?: number;
}

/**
 * Fresh ids; the key, what lets only the gateway call the engine, is derived from the
 * id with the server's secret (`keyOf`), so it is never stored and never guessable.
 */
export function newReplicaIds(keyOf: EngineKeyOf, masterPort?: number): ReplicaIds {
  const id = `r-${randomUUID().slice(0, 8)}`;
  return {
    id,
    apiKey: keyOf(id),
    ...(masterPort !== undefined ? { masterPort } : {}),
  };
}

/** The replica a planned one becomes once it has its ids; its shards are named after it. */
export function materialize(p: PlannedReplica, ids: ReplicaIds): Replica {
  const { shards, ...rest } = p;
  return {
    id: ids.id,
    ...rest,
    apiKey: ids.apiKey,
    ...(ids.masterPort !== undefined ? { masterPort: ids.masterPort } : {}),
    shards: shards.map((s) => ({ id: `${ids.id}-${s.rank}`, ...s })),
  };
}

export const MASTER_PORTS = { first: 29500, last: 29999 } as const;

/**
 * The rendezvous port to hand out from `next` on, skipping those that replicas still
 * holding resources use (the counter restarts with the server, and wraps), so two
 * replicas never share one. Returns the port and where the next search starts.
 */
export function allocatePort(replicas: Iterable<Replica>, next: number): { port: number; next: number } {
  const inUse = new Set<number>();
  for (const r of replicas) if (r.masterPort !== undefined && HOLDS_RESOURCES.has(r.state)) inUse.add(r.masterPort);
  const after = (p: number) => (p >= MASTER_PORTS.last ? MASTER_PORTS.first : p + 1);
  let port = next;
  for (let i = 0; i < 500 && inUse.has(port); i++) port = after(port);
  return { port, next: after(port) };
}

/**
 * A replica stored by a server from before specs were frozen gets one from the catalog
 * it finds on load; without its model or profile there it gets none (and no
 * assignments) until reconcile removes it.
 */
export function withSpec<R extends StoredReplica>(r: R, models: readonly Model[]): R {
  if (r.spec) return r;
  const model = models.find((m) => m.name === r.model);
  const profile = model?.profiles.find((p) => p.name === r.profile);
  return model && profile ? { ...r, spec: specOf(model, profile) } : r;
}

/** Replicas are shared with views and the gateway: frozen, so a reader can never change one under the controller. */
export function frozen(r: Replica): Replica {
  for (const s of r.shards) Object.freeze(s);
  Object.freeze(r.shards);
  if (r.spec?.file) Object.freeze(r.spec.file);
  if (r.spec) Object.freeze(r.spec);
  return Object.freeze(r);
}

/**
 * Applies a plan's actions to the replicas in memory, in the order that keeps them
 * consistent: removals first, then the replicas changed and kept (each once, as the
 * whole pass left it), then creations, which get their ids from `idsFor` here. Returns
 * the ids it changed (to be written), the replicas it removed, and the decisions, each
 * with its replica as created, removed or updated (for the events).
 */
export function applyActions(
  actions: readonly PlannedAction[],
  replicas: Map<string, Replica>,
  idsFor: (p: PlannedReplica) => ReplicaIds,
  log: Logger,
): { changed: string[]; removed: Replica[]; decided: Decision[] } {
  const changed: string[] = [];
  const removed: Replica[] = [];
  const touched = new Map<unknown, Replica>();
  const gone = new Set<string>();
  for (const action of actions) {
    if (action.kind !== 'remove') continue;
    const id = action.replicaId;
    gone.add(id);
    const r = replicas.get(id);
    if (r) {
      touched.set(id, r);
      removed.push(r);
    }
    replicas.delete(id);
    changed.push(id);
    log.info({ replica: id, model: r?.model, code: action.code, reason: action.reason }, 'replica removed');
  }
  const updated = new Set<string>();
  for (const action of actions) {
    const u = action.kind === 'update' ? action.replica : undefined;
    if (!u || gone.has(u.id) || updated.has(u.id)) continue;
    updated.add(u.id);
    const before = replicas.get(u.id);
    replicas.set(u.id, frozen(u));
    changed.push(u.id);
    if (before?.state !== u.state)
      log.info({ replica: u.id, model: u.model, from: before?.state, to: u.state, reason: u.drainReason }, 'replica state changed');
    else if (u.drainBlocked && before?.drainBlocked !== u.drainBlocked) log.warn({ replica: u.id, model: u.model }, `drain blocked: ${u.drainBlocked}`);
  }
  for (const action of actions) {
    if (action.kind !== 'create') continue;
    const r = materialize(action.replica, idsFor(action.replica));
    replicas.set(r.id, frozen(r));
    changed.push(r.id);
    touched.set(action, r);
    log.info(
      { replica: r.id, model: r.model, profile: r.profile, nodes: r.shards.map((s) => s.nodeId), code: action.code, reason: action.reason },
      'replica placed',
    );
  }
  const decided = actions.map((a): Decision => ({
    kind: a.kind,
    code: a.code,
    reason: a.reason,
    ...(a.kind === 'create' ? { replica: touched.get(a) } : { replicaId: a.replicaId, replica: touched.get(a.replicaId) ?? replicas.get(a.replicaId) }),
  }));
  return { changed, removed, decided };
}
