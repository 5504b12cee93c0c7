import type { DownloadProgress, ShardStatus } from '@llmgw/shared';
import type { Replica } from '../domain.js';

/** A shard's model file began coming, came, or failed to (for `ctl events`). */
export interface DownloadChange {
  kind: 'started' | 'finished' | 'failed';
  replica: Replica;
  shardId: string;
  nodeId: string;
  /** The last progress the agent reported. */
  progress: DownloadProgress;
  /** How long it was seen coming, in ms (finished and failed). */
  tookMs?: number;
  /** The shard's error (failed). */
  error?: string;
}

interface Coming {
  nodeId: string;
  progress: DownloadProgress;
  sinceMs: number;
}

/**
 * The model files coming to agents now, per shard, as heartbeats report them
 * (`ShardStatus.download`). Soft state like log tails: it changes on every beat of a
 * download, so it is kept in memory and never written to the store; a restarted server
 * learns it again at the next beat. A change of phase is returned for the events.
 */
export class Downloads {
  private readonly coming = new Map<string, Coming>();

  /** Progress of shard `shardId`'s file, while it comes. */
  of(shardId: string): DownloadProgress | undefined {
    return this.coming.get(shardId)?.progress;
  }

  /**
   * One heartbeat of node `nodeId`, after its shard reports were applied to `replicaOf`'s
   * replicas. Only the node's own shards of known replicas count (a node speaks for
   * itself only); a shard it no longer reports is forgotten.
   */
  report(nodeId: string, shards: readonly ShardStatus[], replicaOf: (id: string) => Replica | undefined, nowMs: number): DownloadChange[] {
    const changes: DownloadChange[] = [];
    const seen = new Set<string>();
    for (const st of shards) {
      const replica = replicaOf(st.replica_id);
      if (!replica?.shards.some((s) => s.id === st.id && s.nodeId === nodeId)) continue;
      seen.add(st.id);
      const before = this.coming.get(st.id);
      if (st.download && st.state === 'starting') {
        this.coming.set(st.id, { nodeId, progress: st.download, sinceMs: before?.sinceMs ?? nowMs });
        if (!before) changes.push({ kind: 'started', replica, shardId: st.id, nodeId, progress: st.download });
        continue;
      }
      if (!before) continue;
      this.coming.delete(st.id);
      const tookMs = nowMs - before.sinceMs;
      // The error as the replica keeps it, with the engine key masked (called after the reports are applied).
      const error = replica.shards.find((s) => s.id === st.id)?.error;
      if (st.state === 'failed')
        changes.push({ kind: 'failed', replica, shardId: st.id, nodeId, progress: before.progress, tookMs, ...(error ? { error } : {}) });
      else if (st.state !== 'stopped') changes.push({ kind: 'finished', replica, shardId: st.id, nodeId, progress: before.progress, tookMs });
    }
    for (const [id, c] of this.coming) if (c.nodeId === nodeId && !seen.has(id)) this.coming.delete(id);
    return changes;
  }
}
