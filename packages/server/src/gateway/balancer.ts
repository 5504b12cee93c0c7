import type { RouteTarget } from '../controller/controller.js';
import type { TokenUsage } from './usage.js';

/**
 * The request a policy routes, shared by all its attempts: the model being tried and the
 * parsed body. `state` is the policy's own (cache-aware keeps the prompt's block hashes
 * there, hashed once, and its last decision).
 */
export interface Routed {
  readonly model: string;
  readonly body: Record<string, unknown>;
  /** A Responses API request (`/v1/responses`): its prompt is `instructions` and `input`, where an embedding's `input` is not one. */
  readonly responses?: boolean;
  /** The LoRA adapter the request names, when it names one (`AdapterAffinity` routes by it). */
  readonly adapter?: string;
  state?: unknown;
}

/** How an attempt on the picked replica went, for a policy that learns from it. */
export interface AttemptOutcome {
  /** The engine answered (a 2xx–4xx reply, or a stream); false when the attempt failed. */
  answered: boolean;
  /** The usage the engine reported, when it was valid. */
  usage?: TokenUsage;
  /** The engine's prefix cache capacity in tokens (`x-llmgw-prefix-cache-tokens`), when it said. */
  prefixCacheTokens?: number;
}

/**
 * A routing policy: which of a model's ready replicas gets the next attempt. An
 * interface so that each model's `routing:` (`CacheAware`, the default, or `LeastLoaded`)
 * or a test's own policy plugs in without touching the attempt loop. Runs on every attempt, so implementations must not
 * allocate: they get the candidates as the controller's cached array and ask for each
 * replica's load through the two functions rather than receiving a new list.
 */
export interface Balancer {
  /**
   * The replica to try next, or undefined when none is eligible.
   * @param inFlight requests this gateway has in flight on a replica
   * @param eligible false for a replica this request already tried or that is cooling down
   */
  pick(
    candidates: readonly RouteTarget[],
    inFlight: (replicaId: string) => number,
    eligible: (replicaId: string) => boolean,
    request?: Routed,
  ): RouteTarget | undefined;
  /** The picked replica's first byte came (for a stream, its prefill is over). */
  firstByte?(request: Routed, target: RouteTarget): void;
  /** The attempt on the picked replica ended; called once per pick, whatever happened. */
  ended?(request: Routed, target: RouteTarget, outcome: AttemptOutcome): void;
  /** Forgets replicas that are not ready any more. */
  retain?(ready: ReadonlySet<string>): void;
}

/**
 * `routing: least-loaded`: the eligible replica with the fewest requests in flight, ties
 * broken at random so that idle replicas share the load evenly. Not the default
 * (`cache-aware` is, `DEFAULT_ROUTING`); `CacheAware` falls back to it when no replica
 * is sticky or a request has no routing text.
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
