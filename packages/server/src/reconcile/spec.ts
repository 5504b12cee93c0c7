import { DEFAULT_MAX_LOADED_ADAPTERS, type Model, type Profile } from '@llmgw/shared';
import type { ReplicaSpec } from '../domain.js';
import { fileOf } from '../files/sources.js';

/**
 * What a replica of `model` placed with `profile` runs. Taken once, when the replica is
 * planned, and kept on it: its assignments never depend on the catalog of the day.
 */
export function specOf(model: Model, profile: Profile): ReplicaSpec {
  const source = profile.source ?? model.source;
  // A profile's own source carries its own digest (the catalog checks it has one) and size.
  const own = profile.source !== undefined;
  const file = fileOf(source, own ? profile.sha256 : model.sha256, own ? profile.size_bytes : model.size_bytes);
  return {
    engine: profile.engine,
    source,
    args: profile.args ?? [],
    env: profile.env ?? {},
    ...(profile.command ? { command: profile.command } : {}),
    ...(profile.startup_timeout_s ? { startupTimeoutS: profile.startup_timeout_s } : {}),
    ...(file ? { file } : {}),
    ...(model.adapters?.length
      ? {
          adapters: model.adapters.map((a) => {
            const f = fileOf(a.source, a.sha256);
            return { name: a.name, source: a.source, ...(f ? { file: f } : {}) };
          }),
          maxLoadedAdapters: profile.max_loaded_adapters ?? DEFAULT_MAX_LOADED_ADAPTERS,
        }
      : {}),
  };
}
