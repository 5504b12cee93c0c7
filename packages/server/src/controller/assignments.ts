import type { ShardAssignment } from '@llmgw/shared';
import type { Replica } from '../domain.js';

/**
 * The shards node `nodeId` should run, built from the replicas that hold resources
 * there and the spec each froze when it was created — never from the current catalog,
 * so a catalog edit does not restart engines under a running replica. `addrOf` gives a
 * node's address, for the followers of a multi-node replica to find rank 0.
 */
export function assignmentsFor(nodeId: string, replicas: Iterable<Replica>, addrOf: (nodeId: string) => string | undefined): ShardAssignment[] {
  const out: ShardAssignment[] = [];
  for (const r of replicas) {
    // A draining replica keeps running (it finishes its requests); failed and stopped ones do not.
    if (r.state === 'stopped' || r.state === 'failed' || !r.spec) continue;
    if (!r.shards.some((s) => s.nodeId === nodeId)) continue;
    const spec = r.spec;
    const head = r.shards.find((s) => s.rank === 0);
    const headAddr = head ? addrOf(head.nodeId) : undefined;
    const multi = r.shards.length > 1;
    for (const s of r.shards) {
      if (s.nodeId !== nodeId) continue;
      out.push({
        id: s.id,
        replica_id: r.id,
        model: r.model,
        profile: r.profile,
        engine: spec.engine,
        source: spec.source,
        rank: s.rank,
        shards: r.shards.length,
        gpus: s.gpuUuids,
        gpu_indices: s.gpuIndices,
        args: spec.args,
        env: spec.env,
        ...(spec.command ? { command: spec.command } : {}),
        ...(multi && headAddr ? { master_addr: headAddr } : {}),
        ...(multi && r.masterPort ? { master_port: r.masterPort } : {}),
        api_key: r.apiKey,
        ...(spec.startupTimeoutS ? { startup_timeout_s: spec.startupTimeoutS } : {}),
        ...(spec.file ? { file: spec.file } : {}),
        ...(spec.adapters ? { adapters: spec.adapters, max_loaded_adapters: spec.maxLoadedAdapters } : {}),
      });
    }
  }
  return out;
}
