import type { Replica } from '../domain.js';

/** A ready replica the gateway may send a model's requests to. */
export interface RouteTarget {
  readonly replicaId: string;
  readonly endpoint: string;
  readonly apiKey: string;
}

/**
 * What the gateway may route to, per model: ready replicas with an endpoint whose every
 * shard is on a node that reports (a node that stopped reporting gets no traffic: its
 * engines may be gone).
 */
export function routeTable(replicas: Iterable<Replica>, nodeIsLive: (nodeId: string) => boolean): Map<string, readonly RouteTarget[]> {
  const table = new Map<string, RouteTarget[]>();
  for (const r of replicas) {
    if (r.state !== 'ready' || !r.endpoint) continue;
    if (!r.shards.every((s) => nodeIsLive(s.nodeId))) continue;
    const list = table.get(r.model) ?? [];
    list.push(Object.freeze({ replicaId: r.id, endpoint: r.endpoint, apiKey: r.apiKey }));
    table.set(r.model, list);
  }
  return table;
}
