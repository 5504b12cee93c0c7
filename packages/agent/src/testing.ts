import type { ShardAssignment } from '@llmgw/shared';

/**
 * Test helpers shared by the agent's tests (imported by tests only, never bundled).
 */

/** Polls `fn` every 25 ms until it returns something truthy; fails after `ms` naming `what`. */
export async function waitFor<T>(what: string, fn: () => T | undefined | false, ms = 8000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A shard assignment of a one-shard replica on the CPU, with `over` on top: `replica_id`
 * is the id without its `-0`, so a shard `r1-0` belongs to replica `r1`.
 */
export function shardAssignment(id: string, over: Partial<ShardAssignment> = {}): ShardAssignment {
  return {
    id,
    replica_id: id.replace(/-0$/, ''),
    model: 'm',
    profile: 'cpu',
    engine: 'llama.cpp',
    source: 'x',
    rank: 0,
    shards: 1,
    gpus: [],
    gpu_indices: [],
    args: [],
    env: {},
    api_key: 'k',
    ...over,
  };
}
