import type { RolloutChange } from '../reconcile/reconcile.js';
import type { Decision } from '../domain.js';
import type { NewEvent } from './event-log.js';

/** Codes that need an operator's look. */
const WARNINGS: ReadonlySet<string> = new Set(['failed', 'node-lost', 'node-unknown', 'drain-blocked', 'drain-deadline', 'drain-not-serving', 'engine-failed']);

/**
 * The event a decision is recorded as: about its replica, on its nodes, of its model. A
 * replacement concerns the node of the replica it replaces too (`nodesOf`), so the events
 * of a drained node show where its replicas went.
 */
export function decisionEvent(d: Decision, nodesOf: (replicaId: string) => string[] = () => []): NewEvent {
  const r = d.replica;
  const id = r?.id ?? d.replicaId ?? '?';
  const own = [...new Set(r?.shards.map((s) => s.nodeId) ?? [])];
  const nodes = [...new Set([...own, ...(r?.replaces ? nodesOf(r.replaces) : [])])];
  const where = own.length ? ` on ${own.join(', ')}` : '';
  const message =
    d.kind === 'create'
      ? `placed${where}${r ? ` (model ${r.model}, profile ${r.profile})` : ''}: ${d.reason}`
      : d.kind === 'remove'
        ? `removed${where}: ${d.reason}`
        : d.kind === 'report'
          ? `failed: ${d.reason}`
          : d.reason;
  return {
    type: WARNINGS.has(d.code) ? 'Warning' : 'Normal',
    source: 'reconciler',
    reason: d.code,
    object: `replica/${id}`,
    nodes,
    ...(r ? { model: r.model } : {}),
    message,
  };
}

/**
 * A rollout that began (a new revision), completed, paused, waits for room or halted, as
 * an event about its model: `rollout-started`, `rollout-complete`, `rollout-halted`, …
 */
export function rolloutEvent(r: RolloutChange): NewEvent {
  const started = r.change !== undefined;
  const message = started
    ? `revision ${r.revision}: ${r.change}`
    : `rollout to revision ${r.revision} ${r.state === 'complete' ? 'complete' : r.state}${r.reason ? `: ${r.reason}` : ''}`;
  return {
    type: r.state === 'halted' || r.state === 'waiting' ? 'Warning' : 'Normal',
    source: 'reconciler',
    reason: started ? 'rollout-started' : `rollout-${r.state}`,
    object: `model/${r.model}`,
    nodes: [],
    model: r.model,
    message,
  };
}
