import type { Model, NodeReport } from '@llmgw/shared';
import type { FetchedGguf } from './files/header-estimates.js';
import { fileDigestOf, isFetchedSource } from './files/sources.js';
import type { PlacementProfile } from './snapshot.js';

/** Engines whose `source` is a GGUF file the agent can read the header of. */
const GGUF_ENGINES = new Set(['node-llama-cpp', 'llama.cpp']);

const estimated = new WeakMap<readonly Model[], string[]>();

/**
 * `sourcesToEstimate` of a catalog's models, worked out once per catalog rather than per
 * heartbeat (a catalog's model list is replaced on reload, never changed in place).
 */
export function sourcesToEstimateOnce(models: Model[]): string[] {
  let sources = estimated.get(models);
  if (!sources) estimated.set(models, (sources = sourcesToEstimate(models)));
  return sources;
}

/**
 * GGUF sources of profiles that state no `min_memory_gb`: agents are asked to estimate
 * them. Sources agents fetch are not: no agent has the file before it is placed, so the
 * server reads their headers itself (`fetchedToEstimate`).
 */
export function sourcesToEstimate(models: Model[]): string[] {
  const out = new Set<string>();
  for (const m of models) {
    for (const p of m.profiles) {
      const source = p.source ?? m.source;
      if (GGUF_ENGINES.has(p.engine) && p.min_memory_gb === undefined && !isFetchedSource(source)) out.add(source);
    }
  }
  return [...out].sort();
}

/** GGUF sources agents fetch, of profiles that state no `min_memory_gb`: the server reads their headers. */
export function fetchedToEstimate(models: Model[]): FetchedGguf[] {
  const out = new Map<string, FetchedGguf>();
  for (const m of models) {
    for (const p of m.profiles) {
      const sha256 = fileDigestOf(m, p);
      if (GGUF_ENGINES.has(p.engine) && p.min_memory_gb === undefined && sha256 !== undefined)
        out.set(p.source ?? m.source, { source: p.source ?? m.source, sha256 });
    }
  }
  return [...out.values()];
}

/** Where the estimates of fetched sources come from (`HeaderEstimates`). */
export interface FetchedEstimates {
  lookup(wanted: readonly FetchedGguf[]): { estimates: ReadonlyMap<string, number>; pending: ReadonlySet<string> };
}

/**
 * The catalog as one reconcile pass places it, and the models it holds back: agents'
 * estimates (the largest per source) and the server's own for fetched sources; a model
 * waits while a source of it is being estimated by either.
 */
export function placementModels(
  models: Model[],
  reports: readonly (NodeReport | undefined)[],
  liveReports: readonly (NodeReport | undefined)[],
  fetched?: FetchedEstimates,
): { models: Model[]; defer: Set<string> } {
  const remote = fetched?.lookup(fetchedToEstimate(models));
  const pending = pendingSources(sourcesToEstimate(models), liveReports);
  for (const s of remote?.pending ?? []) pending.add(s);
  const estimates = estimatesFrom(reports);
  for (const [s, mb] of remote?.estimates ?? []) estimates.set(s, mb);
  return { models: withEstimates(models, estimates), defer: modelsAwaitingEstimates(models, pending) };
}

/**
 * Sources some live agent has not looked at yet. A model waits for them (one heartbeat)
 * rather than being placed without its memory need. Agents that cannot estimate (no
 * `estimated_sources` in their report) are never waited for.
 */
export function pendingSources(sources: string[], liveReports: Iterable<NodeReport | undefined>): Set<string> {
  const pending = new Set<string>();
  for (const r of liveReports) {
    if (!r?.estimated_sources) continue;
    for (const s of sources) if (!r.estimated_sources.includes(s)) pending.add(s);
  }
  return pending;
}

/** Models with a profile whose estimate is still pending. */
export function modelsAwaitingEstimates(models: Model[], pending: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  if (pending.size === 0) return out;
  for (const m of models) {
    if (m.profiles.some((p) => GGUF_ENGINES.has(p.engine) && p.min_memory_gb === undefined && pending.has(p.source ?? m.source))) out.add(m.name);
  }
  return out;
}

/** The largest estimate any node reported per source, in MiB. */
export function estimatesFrom(reports: Iterable<NodeReport | undefined>): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of reports) {
    for (const e of r?.source_estimates ?? []) out.set(e.source, Math.max(out.get(e.source) ?? 0, e.memory_mb));
  }
  return out;
}

/**
 * The catalog as placement should see it: a GGUF profile without `min_memory_gb` takes
 * the estimate from the model file (weights + KV cache + overhead), marked as such so
 * explanations say "needs about 9 GiB (estimated from the GGUF)". Without an estimate the
 * profile is left as written (no requirement).
 */
export function withEstimates(models: Model[], estimates: ReadonlyMap<string, number>): Model[] {
  if (estimates.size === 0) return models;
  return models.map((m) => {
    let changed = false;
    const profiles = m.profiles.map((p): PlacementProfile => {
      if (!GGUF_ENGINES.has(p.engine) || p.min_memory_gb !== undefined) return p;
      const mb = estimates.get(p.source ?? m.source);
      if (mb === undefined) return p;
      changed = true;
      return { ...p, min_memory_gb: Math.ceil((mb / 1024) * 10) / 10, memory_estimated: true };
    });
    return changed ? { ...m, profiles } : m;
  });
}
