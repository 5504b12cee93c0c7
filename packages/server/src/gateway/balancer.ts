import type { RouteTarget } from '../controller/controller.js';

/**
 * A routing policy: which of a model's ready replicas gets the next attempt. An
 * interface so that another policy (cache-aware routing, say) can replace the default
 * without touching the attempt loop. Runs on every attempt, so implementations must not
 * allocate: they get the candidates as the controller's cached array and ask for each
 * replica's load through the two functions rather than receiving a new list.
 */
export interface Balancer {
  /**
   * The replica to try next, or undefined when none is eligible.
   * @param inFlight requests this gateway has in flight on a replica
   * @param eligible false for a replica this request already tried or that is cooling down
   */
  pick(candidates: readonly RouteTarget[], inFlight: (replicaId: string) => number, eligible: (replicaId: string) => boolean): RouteTarget | undefined;
}

/**
 * The default policy: the eligible replica with the fewest requests in flight, ties
 * broken at random so that idle replicas share the load evenly.
 */
export class LeastLoaded implements Balancer {
  constructor(private readonly random: () => number = Math.random) {}

  pick(candidates: readonly RouteTarget[], inFlight: (replicaId: string) => number, eligible: (replicaId: string) => boolean): RouteTarget | undefined {
    let best: RouteTarget | undefined;
    let bestLoad = Infinity;
    let ties = 0;
    for (const t of candidates) {
      if (!eligible(t.replicaId)) continue;
      const load = inFlight(t.replicaId);
      if (load < bestLoad) {
        best = t;
        bestLoad = load;
        ties = 1;
      } else if (load === bestLoad && this.random() * ++ties < 1) {
        // Reservoir sampling: each of the tied replicas is equally likely.
        best = t;
      }
    }
    return best;
  }
}
