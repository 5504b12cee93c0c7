import { createHash } from 'node:crypto';
import type { ShardAssignment } from '@llmgw/shared';

/**
 * What decides whether a running engine still matches its assignment. Deliberately
 * left out: `startup_timeout_s` (no reason to restart a running engine) and
 * `gpu_indices` (indices shift when another GPU is lost; the UUIDs are what the engine sees).
 */
const FINGERPRINT_FIELDS = [
  'id',
  'replica_id',
  'model',
  'profile',
  'engine',
  'source',
  'rank',
  'shards',
  'gpus',
  'args',
  'env',
  'command',
  'master_addr',
  'master_port',
  'api_key',
  'file',
] as const;

/** A stable hash of the assignment fields that shape the engine process. */
export function fingerprint(a: ShardAssignment): string {
  const picked: Record<string, unknown> = {};
  for (const f of FINGERPRINT_FIELDS) if (a[f] !== undefined) picked[f] = a[f];
  return 'v1:' + createHash('sha256').update(canonicalJson(picked)).digest('hex').slice(0, 32);
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** A shard the supervisor runs, as convergence and collisions see it. */
export interface Running {
  a: Pick<ShardAssignment, 'id' | 'gpus'>;
  fingerprint: string;
}

/** The changes that make the running set equal to the assigned one. */
export interface ConvergePlan<T extends Running> {
  /** Running shards no longer assigned, or assigned with another fingerprint: stop them. */
  retire: T[];
  /** Running shards that match: keep them, with the (possibly updated) assignment. */
  keep: { shard: T; assignment: ShardAssignment }[];
  /** Assignments with no shard left after retiring: start them. */
  start: ShardAssignment[];
}

/**
 * Called on every assignment list from the server. A changed assignment (same id,
 * other fingerprint) is retired and started again; a matching one is kept whatever its
 * state — a `failed` one included, until the server changes or drops it.
 */
export function planConverge<T extends Running>(running: Iterable<T>, assignments: readonly ShardAssignment[]): ConvergePlan<T> {
  const wanted = new Map(assignments.map((a) => [a.id, a]));
  const plan: ConvergePlan<T> = { retire: [], keep: [], start: [] };
  const kept = new Set<string>();
  for (const shard of running) {
    const a = wanted.get(shard.a.id);
    if (!a || fingerprint(a) !== shard.fingerprint) {
      plan.retire.push(shard);
    } else {
      plan.keep.push({ shard, assignment: a });
      kept.add(a.id);
    }
  }
  for (const a of wanted.values()) if (!kept.has(a.id)) plan.start.push(a);
  return plan;
}

/**
 * A stopping engine that holds the shard's id or any of its GPUs: starting beside it
 * would collide (two engines on one GPU's memory, or one log and state record for two).
 */
export function blockerOf<T extends Running>(shard: Running, stopping: Iterable<T>): T | undefined {
  for (const r of stopping) {
    if (r.a.id === shard.a.id || r.a.gpus.some((g) => shard.a.gpus.includes(g))) return r;
  }
  return undefined;
}
