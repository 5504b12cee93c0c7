import type { ReplicaState } from '@llmgw/shared';
import type { Replica } from '../domain.js';
import type { Inventory } from '../inventory.js';
import type { EngineProbes, ProbeTarget } from './engine-probes.js';

/**
 * Whether a replica serves, judged by its engine as well as its agent (issue 28): a
 * ready replica is routed while every node it runs on reports, and also while a node
 * that went silent is not yet lost as long as the server's own probes of the engine
 * answer (`EngineProbes`). `silentS` is how long the quietest such agent has been
 * silent, for `ctl replicas` ("serving, agent silent 42s"); absent when every agent
 * reports or the replica does not serve.
 */
export function serving(r: Replica, inventory: Inventory, probes: EngineProbes, nowMs: number): { serves: boolean; silentS?: number } {
  if (r.state !== 'ready' || !r.endpoint) return { serves: false };
  let silentMs = 0;
  for (const s of r.shards) {
    const n = inventory.get(s.nodeId);
    if (!n) return { serves: false };
    const liveness = inventory.liveness(n, nowMs);
    if (liveness === 'ready') continue;
    if (liveness === 'lost' || !probes.answers(r.id, nowMs)) return { serves: false };
    silentMs = Math.max(silentMs, inventory.silenceMs(n, nowMs));
  }
  return silentMs > 0 ? { serves: true, silentS: Math.max(0, Math.round(silentMs / 1000)) } : { serves: true };
}

/** The states in which a replica's engine should be running. */
const LIVE_STATES: ReadonlySet<ReplicaState> = new Set(['starting', 'ready', 'draining']);

/**
 * The nodes of a live replica that are not heard from (silent, or not reported since
 * this server started) while the server's own probes do not vouch for its engine. Every
 * surface (ctl replicas, the dashboard, ctl models' READY, the gateway's 503) shows such
 * a replica `unknown` and names these nodes, so none calls `ready` what the gateway
 * does not route to (issue 30).
 */
export function unheardNodes(r: Replica, inventory: Inventory, probes: EngineProbes, nowMs: number): string[] {
  if (!LIVE_STATES.has(r.state) || serving(r, inventory, probes, nowMs).silentS !== undefined) return [];
  const out = new Set<string>();
  for (const s of r.shards) {
    const n = inventory.get(s.nodeId);
    if (n === undefined || inventory.liveness(n, nowMs) !== 'ready') out.add(s.nodeId);
  }
  return [...out];
}

/**
 * The engines to probe: ready replicas with a shard on a node silent for more than half
 * of `--not-ready-after` and not lost, so that probes have answered before the node is
 * not-ready and traffic never pauses on the way.
 */
export function quietTargets(replicas: Iterable<Replica>, inventory: Inventory, nowMs: number): ProbeTarget[] {
  const quietAfterMs = inventory.policy.notReadyAfterMs / 2;
  const out: ProbeTarget[] = [];
  for (const r of replicas) {
    if (r.state !== 'ready' || !r.endpoint) continue;
    const quiet = r.shards.some((s) => {
      const n = inventory.get(s.nodeId);
      return n !== undefined && inventory.liveness(n, nowMs) !== 'lost' && inventory.silenceMs(n, nowMs) > quietAfterMs;
    });
    if (quiet) out.push({ replicaId: r.id, endpoint: r.endpoint, apiKey: r.apiKey });
  }
  return out;
}
