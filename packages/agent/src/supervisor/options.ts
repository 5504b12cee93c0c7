import type { Logger } from 'pino';
import type { EngineBins } from '../engines.js';
import type { EngineUser } from '../engine-user.js';
import type { FileSource } from '../files/store.js';
import type { RestartPolicy } from './state-machine.js';

/** Construction options; everything but the first five has a production default. */
export interface SupervisorOptions {
  /** Holds `shards.json` (what a restarted agent re-adopts) and `logs/<shard>.log`. */
  stateDir: string;
  /** Inclusive range engines may listen on. */
  portRange: [number, number];
  /** Address engines bind to; a wildcard is probed through loopback. */
  bindHost: string;
  bins: EngineBins;
  log: Logger;
  /** The account engines run as (`resolveEngineUser`); none: as the agent itself. */
  engineUser?: EngineUser;
  /** Model files for assignments with a `file` (fetched before the engine starts); none: such shards fail. */
  files?: FileSource;
  /** Run `engine: command` shards; without it they are reported failed. Default false. */
  allowCommandEngine?: boolean;
  /** SIGTERM → SIGKILL grace for a process group. Default 10 s. */
  stopGraceMs?: number;
  /** When the assignment has no `startup_timeout_s`. Default 600 s. */
  defaultStartupTimeoutS?: number;
  /** Failures tolerated within `restartWindowMs` before a shard is reported failed. Default 5. */
  maxRestarts?: number;
  /** Default 10 min: a shard that crashes once a day is never given up on. */
  restartWindowMs?: number;
  /** First restart delay; doubles per recent failure, capped at 30 s. Default 1 s. */
  backoffBaseMs?: number;
  /** A log past this size is cut to its last half. Default 5 MiB. */
  logMaxBytes?: number;
  /** Readiness, health and liveness poll interval. Default 1 s. */
  healthIntervalMs?: number;
}

/** The options with every default filled in (the engine user has none: absent means the agent's own). */
export type ResolvedOptions = Required<Omit<SupervisorOptions, 'engineUser' | 'files'>> & Pick<SupervisorOptions, 'engineUser' | 'files'>;

/** Fills in the production defaults; tests shorten the intervals. */
export function withDefaults(options: SupervisorOptions): ResolvedOptions {
  return {
    stopGraceMs: 10_000,
    defaultStartupTimeoutS: 600,
    maxRestarts: 5,
    restartWindowMs: 10 * 60_000,
    backoffBaseMs: 1_000,
    logMaxBytes: 5 * 1024 * 1024,
    healthIntervalMs: 1_000,
    allowCommandEngine: false,
    ...options,
  };
}

/** The part of the options the shard state machine reads. */
export function restartPolicy(o: ResolvedOptions): RestartPolicy {
  return { maxRestarts: o.maxRestarts, restartWindowMs: o.restartWindowMs, backoffBaseMs: o.backoffBaseMs };
}
