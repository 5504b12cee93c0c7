import type { Model } from '@llmgw/shared';
import type { Replica, RolloutRecord } from '../domain.js';
import type { NodeSnapshot } from '../snapshot.js';

export interface ReconcilePolicy {
  /** First backoff of a failed replica before it is replaced; doubles per failure of its model. */
  failedBackoffMs: number;
  /** Replacements for a draining node that may be in progress at once, per model. */
  drainParallel: number;
  /** A replacement must be ready this long before the replica it replaces stops taking traffic. */
  minHealthyMs: number;
  /** Longest a replica that takes no new traffic waits for its in-flight requests. */
  drainTimeoutMs: number;
  /** Above this share of nodes lost at once, lost nodes' replicas are not replaced. */
  maxLostFraction: number;
}

/** What the gateway knows about a model's traffic. */
export interface ModelLoad {
  inFlight: number;
  lastRequestMs?: number;
  /** Requests waiting for a model with no ready replica (scale from zero). */
  waiting: number;
}

/**
 * Everything one pass looks at, as plain data: the caller takes the snapshot (catalog,
 * fleet, replicas, traffic, failure counts) and the pass reads nothing else, so the same
 * input always gives the same plan and a test builds one from literals.
 */
export interface ReconcileInput {
  models: Model[];
  nodes: NodeSnapshot[];
  replicas: Replica[];
  nowMs: number;
  policy: ReconcilePolicy;
  /** Requests in flight per replica id; a replica missing here has none. */
  inFlight: ReadonlyMap<string, number>;
  /** Traffic per model name; a model missing here has had none. */
  load: ReadonlyMap<string, ModelLoad>;
  /** Replicas of each model that failed since the server started (the backoff doubles per failure). */
  failures: ReadonlyMap<string, number>;
  /** Since when each model has wanted fewer replicas than it has (the scale-down window). */
  lowSince: ReadonlyMap<string, number>;
  /** Models not to place this pass (their memory estimate is on its way). */
  defer?: ReadonlySet<string>;
  /** Each model's revision now (`revisionOf` its catalog entry); a model missing here is not rolled. */
  revisions?: ReadonlyMap<string, string>;
  /** What is stored of each model's rollouts (pause, resume, halt); a model missing here has none. */
  rollouts?: ReadonlyMap<string, RolloutRecord>;
}

export const NO_LOAD: ModelLoad = { inFlight: 0, waiting: 0 };
