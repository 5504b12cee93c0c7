import { makeModel, makeNode } from '../../test/factories.js';
import type { Replica } from '../domain.js';
import type { PlannedAction, PlannedReplica } from './actions.js';
import type { ReconcileInput } from './input.js';
import { Plan } from './plan.js';

/**
 * For tests: a pass's snapshot of the common case — one model wanting one replica, two
 * ready nodes, no replicas, no traffic — with `overrides` saying what a test is about.
 */
export function snapshot(overrides: Partial<ReconcileInput> = {}): ReconcileInput {
  return {
    models: [makeModel()],
    nodes: [makeNode({ id: 'node-1' }), makeNode({ id: 'node-2' })],
    replicas: [],
    nowMs: 1_000_000,
    policy: { failedBackoffMs: 30_000, drainParallel: 1, minHealthyMs: 5_000, drainTimeoutMs: 60_000, maxLostFraction: 0.5 },
    inFlight: new Map(),
    load: new Map(),
    failures: new Map(),
    lowSince: new Map(),
    ...overrides,
  };
}

/** For tests: a fresh plan over `snapshot(overrides)`, for running one step alone. */
export function planOf(overrides: Partial<ReconcileInput> = {}): Plan {
  return new Plan(snapshot(overrides));
}

type Actions = { readonly actions: readonly PlannedAction[] };

/** For tests: the replicas a pass (or a step's plan) creates, read from its actions. */
export function created(p: Actions): PlannedReplica[] {
  return p.actions.flatMap((a) => (a.kind === 'create' ? [a.replica] : []));
}

/** For tests: the replicas a pass removes, with why, read from its actions. */
export function removed(p: Actions): { id: string; reason: string }[] {
  return p.actions.flatMap((a) => (a.kind === 'remove' ? [{ id: a.replicaId, reason: a.reason }] : []));
}

/** For tests: the replicas a pass changes and keeps, each once as the pass left it, read from its actions. */
export function updated(p: Actions): Replica[] {
  const gone = new Set(removed(p).map((r) => r.id));
  return [...new Set(p.actions.flatMap((a) => (a.kind === 'update' && !gone.has(a.replicaId) ? [a.replica] : [])))];
}
