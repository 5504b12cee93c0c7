import type { Model, Profile } from '@llmgw/shared';
import type { ReplicaSpec } from '../domain.js';

/**
 * What a replica of `model` placed with `profile` runs. Taken once, when the replica is
 * planned, and kept on it: its assignments never depend on the catalog of the day.
 */
export function specOf(model: Model, profile: Profile): ReplicaSpec {
  return {
    engine: profile.engine,
    source: profile.source ?? model.source,
    args: profile.args ?? [],
    env: profile.env ?? {},
    ...(profile.command ? { command: profile.command } : {}),
    ...(profile.startup_timeout_s ? { startupTimeoutS: profile.startup_timeout_s } : {}),
  };
}
