import type { Replica } from '../domain.js';

/** A ready replica the gateway may send a model's requests to. */
export interface RouteTarget {
  readonly replicaId: string;
  readonly endpoint: string;
  readonly apiKey: string;
  /** The engine the replica runs (its spec's); absent on a replica from before specs. */
  readonly engine?: string;
  /**
   * The LoRA adapters the replica's engine was started with, by name, in the order the
   * agent gave them (`spec.adapters`, as its argv): llama-server selects one by this index.
   * Absent on a replica from before specs.
   */
  readonly adapters?: readonly string[];
}

/**
 * What the gateway may route to, per model: the replicas `serves` lets through (ready,
 * with an endpoint, on nodes that report or whose engines answer the server's probes;
 * see `serving.ts`).
 */
export function routeTable(replicas: Iterable<Replica>, serves: (r: Replica) => boolean): Map<string, readonly RouteTarget[]> {
  const table = new Map<string, RouteTarget[]>();
  for (const r of replicas) {
    if (r.state !== 'ready' || !r.endpoint) continue;
    if (!serves(r)) continue;
    const list = table.get(r.model) ?? [];
    const spec = r.spec ? { engine: r.spec.engine, adapters: Object.freeze((r.spec.adapters ?? []).map((a) => a.name)) } : {};
    list.push(Object.freeze({ replicaId: r.id, endpoint: r.endpoint, apiKey: r.apiKey, ...spec }));
    table.set(r.model, list);
  }
  return table;
}
