import { formatGb, gbToMb } from '@llmgw/shared';
import type { GpuReport, Profile } from '@llmgw/shared';
import type { NodeSnapshot, PlacementProfile } from '../snapshot.js';

/** Nodes that report no pool are grouped as this pool for sharded profiles. */
export const DEFAULT_POOL = 'default';

/**
 * What one profile asks of a node, read once from the catalog's profile into the figures
 * the checks compare against, so no check parses the profile per node.
 */
export interface Requirement {
  profile: Profile;
  gpus: number;
  /** Lower-cased class prefixes; undefined when any class will do. */
  classes: string[] | undefined;
  /** Memoises prefix matching per class string: a fleet has few distinct classes. */
  classCache: Map<string, boolean>;
  needGpuMb: number;
  needMemMb: number;
  /** The memory need is an estimate from the model file, not the catalog's figure. */
  memEstimated: boolean;
  selKeys: string[];
  selVals: string[];
  /** `key=value` per selector entry, as reasons write it: built once, not per node. */
  selPairs: string[];
  /** `lacks label key=value` per selector entry: the reason most nodes give, one string for all. */
  selLacks: string[];
  /** The memory need as a reason says it (`24`, or `about 24 GiB (estimated from the GGUF)`). */
  needMemText: string;
  /** The catalog's GPU classes as reasons say them: `H100 or A100`, and the list `H100,A100`. */
  classesText: string;
  classesList: string;
  shards: number;
  /** Only checked when shards > 1: one node needs no interconnect. */
  fabric: string | undefined;
}

/** Reads `profile` into a Requirement; done once per profile per prepared fleet. */
export function requirementOf(profile: Profile): Requirement {
  const selector = Object.entries(profile.node_selector ?? {});
  const selKeys = selector.map(([k]) => k);
  const selVals = selector.map(([, v]) => v);
  const gpus = profile.gpus ?? 0;
  const needMemMb = profile.min_memory_gb ? gbToMb(profile.min_memory_gb) : 0;
  const memEstimated = (profile as PlacementProfile).memory_estimated === true;
  const shards = profile.shards ?? 1;
  const classes = gpus > 0 && profile.gpu_class !== undefined && profile.gpu_class.length > 0 ? profile.gpu_class : undefined;
  return {
    profile,
    gpus,
    classes: classes?.map((c) => c.toLowerCase()),
    classCache: new Map(),
    needGpuMb: gpus > 0 && profile.min_gpu_memory_gb ? gbToMb(profile.min_gpu_memory_gb) : 0,
    needMemMb,
    memEstimated,
    selKeys,
    selVals,
    selPairs: selector.map(([k, v]) => `${k}=${v}`),
    selLacks: selector.map(([k, v]) => `lacks label ${k}=${v}`),
    needMemText: memEstimated ? `about ${formatGb(needMemMb)} GiB (estimated from the GGUF)` : formatGb(needMemMb),
    classesText: (profile.gpu_class ?? []).join(' or '),
    classesList: (profile.gpu_class ?? []).join(','),
    shards,
    fabric: shards > 1 ? profile.fabric : undefined,
  };
}

/** A class matches by prefix (`H100` accepts `H100-80GB`), ignoring case. */
export function classOk(req: Requirement, cls: string): boolean {
  if (req.classes === undefined) return true;
  let ok = req.classCache.get(cls);
  if (ok === undefined) {
    const lower = cls.toLowerCase();
    ok = req.classes.some((p) => lower.startsWith(p));
    req.classCache.set(cls, ok);
  }
  return ok;
}

export function gpuMemOk(req: Requirement, g: GpuReport): boolean {
  // Unknown GPU memory is not zero: as with host memory, the node stays eligible and the
  // decision carries a note instead.
  return req.needGpuMb === 0 || g.memory_total_mb === undefined || g.memory_total_mb >= req.needGpuMb;
}

/** Healthy and addressable: CUDA_VISIBLE_DEVICES needs the UUID. */
export function healthy(g: GpuReport): boolean {
  return g.problems.length === 0 && g.uuid !== undefined;
}

/**
 * Could `g` serve a shard of `req`? For a CPU profile, which only counts GPUs to keep off
 * GPU machines, any addressable GPU counts, healthy or not: that saves reading every
 * GPU's problem list, and a broken GPU is no reason to prefer a machine for CPU work.
 */
export function serves(req: Requirement, g: GpuReport): boolean {
  if (req.gpus === 0) return g.uuid !== undefined;
  return classOk(req, g.class) && gpuMemOk(req, g) && healthy(g);
}

/** The pool a node counts in for sharded profiles. */
export function poolOf(node: NodeSnapshot): string {
  return node.pool ?? DEFAULT_POOL;
}
