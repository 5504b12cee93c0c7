import type { Adapter, Model } from '@llmgw/shared';
import type { Decision } from '../domain.js';
import type { FetchedEstimates } from '../estimates.js';
import type { ModelLoad, RolloutChange } from '../reconcile/reconcile.js';
import type { PlacementOutcome } from '../snapshot.js';
import type { DownloadChange } from './downloads.js';
import type { EngineKeyOf } from './engine-keys.js';
import type { ProbeEngine } from './engine-probes.js';

// What a Controller is made with, what it reads and what it tells (controller.ts
// re-exports each): its settings and the sources it is handed at construction.

/** The part of the loaded catalog the controller needs. */
export interface CatalogView {
  models: Model[];
  resolve(nameOrAlias: string): Model | undefined;
  suggest(name: string): string[];
  /** The LoRA adapter clients name as a model, with the base model that serves it (absent from views of catalogs without adapters, as tests make). */
  adapter?(name: string): { model: Model; adapter: Adapter } | undefined;
}

export interface PlacementAttempt {
  outcome: PlacementOutcome;
  atMs: number;
}

/** Traffic as the gateway counts it, copied once per reconcile pass. */
export interface LoadSnapshot {
  /** Requests in flight per replica id. */
  inFlight: ReadonlyMap<string, number>;
  /** Traffic per model name. */
  models: ReadonlyMap<string, ModelLoad>;
}

/** Where the controller learns about traffic: the gateway. */
export interface LoadSource {
  loadSnapshot(): LoadSnapshot;
}

export interface ControllerOptions {
  reconcileIntervalMs: number;
  drainParallel: number;
  minHealthyMs: number;
  drainTimeoutMs: number;
  maxLostFraction: number;
  /** First backoff of a failed replica before it is replaced; doubles per failure of the model. */
  failedBackoffMs: number;
  /** The least time between two passes that only a live node's changed report asks for (default 100 ms; see `PassSchedule`). */
  reportPassMs?: number;
  now?: () => number;
  /** Each replica's engine key; a secret of this process only when not given (tests). */
  engineKey?: EngineKeyOf;
  /** The gateway's traffic, copied once per pass (`gateway/traffic.ts`); none when absent (tests). */
  load?: LoadSource;
  /** The memory estimates of GGUF sources agents fetch (`files/header-estimates.ts`). */
  estimates?: FetchedEstimates;
  /**
   * How often the server probes the engines of replicas whose agent went quiet
   * (`--engine-probe-interval`; default 2 s, and at most a quarter of `--not-ready-after`).
   */
  engineProbeIntervalMs?: number;
  /** The probe itself (tests); `GET /health` with the engine key otherwise. */
  probeEngine?: ProbeEngine;
}

/**
 * What the controller tells the rest of the server (the gateway, the events log):
 * `replicas` when the replicas or their routes changed (read them again), `decided` with
 * a pass's decisions or an engine's failure, `rollouts` with the rollouts a pass moved,
 * `downloads` with the model files that started, finished or failed coming to agents.
 */
export interface ControllerEvents {
  replicas: [];
  decided: [Decision[]];
  rollouts: [RolloutChange[]];
  downloads: [DownloadChange[]];
  /** A node's heartbeat was refused for its size: said once until one is accepted again. */
  reportRefused: [ReportRefusal];
}

/** A heartbeat refused as too large (`Controller.refuseReport`). */
export interface ReportRefusal {
  nodeId: string;
  /** Which cap: the node report's, or the whole body's (REPORT_LIMITS). */
  part: 'report' | 'heartbeat';
  /** Its size in bytes, when known (a body refused by its Content-Length is not read). */
  bytes?: number;
  limit: number;
}
