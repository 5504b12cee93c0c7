import { failedChecksum, type DownloadProgress, type ShardStatus } from '@llmgw/shared';
import type { Replica } from '../domain.js';

/** A shard's model file began coming, came, or failed to (for `ctl events`). */
export interface DownloadChange {
  kind: 'started' | 'finished' | 'failed';
  replica: Replica;
  shardId: string;
  nodeId: string;
  /** The last progress the agent reported; absent for a file that came (or failed) between two heartbeats. */
  progress?: DownloadProgress;
  /** The file's size as the agent that fetched it says (`ShardStatus.fetched`; finished). */
  bytes?: number;
  /** How long it took, in ms (finished and failed): the agent's own count with `bytes`, else as heartbeats saw it. */
  tookMs?: number;
  /** The shard's error (failed). */
  error?: string;
}

interface Coming {
  nodeId: string;
  progress: DownloadProgress;
  sinceMs: number;
}

/** What was last recorded of a shard's file, so a status its agent sends again is not recorded twice. */
interface Recorded {
  nodeId: string;
  /** `bytes/ms` of the `fetched` recorded. */
  fetched?: string;
  /** The error of the failure recorded. */
  failed?: string;
}

/**
 * Whether shard status `st` of replica `r` says its file could not be fetched or checked:
 * the agent says so (`download_failed`), or, from an agent older than that field, its
 * error is the checksum mismatch of the replica's model file. The error as the replica
 * keeps it (engine key masked), when it is one.
 */
export function downloadFailure(st: ShardStatus, r: Replica): string | undefined {
  if (!st.error) return undefined;
  const sha256 = r.spec?.file?.sha256;
  const failed = st.download_failed === true || (st.state === 'failed' && sha256 !== undefined && failedChecksum(st.error, sha256));
  return failed ? (r.shards.find((s) => s.id === st.id)?.error ?? st.error) : undefined;
}

/** Whether failed replica `r` failed on a download among heartbeat `shards`: that is `download-failed`, not also `engine-failed`. */
export function failedDownloading(r: Replica, shards: readonly ShardStatus[]): boolean {
  return shards.some((st) => st.replica_id === r.id && st.state === 'failed' && downloadFailure(st, r) !== undefined);
}

/**
 * The model files coming to agents now, per shard, as heartbeats report them
 * (`ShardStatus.download`), and what came or failed (`fetched`, `download_failed`). Soft
 * state like log tails: it changes on every beat of a download, so it is kept in memory
 * and never written to the store; a restarted server learns it again at the next beat
 * (an agent sends `fetched` only until a heartbeat carrying it is accepted, so a restart
 * does not record old files again). A change of phase is returned for the events.
 */
export class Downloads {
  private readonly coming = new Map<string, Coming>();
  private readonly recorded = new Map<string, Recorded>();

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
      // A retry's transfer comes under the error of the try before (`download_failed` holds until the file is here).
      if (st.download && st.state === 'starting') {
        this.coming.set(st.id, { nodeId, progress: st.download, sinceMs: before?.sinceMs ?? nowMs });
        if (!before) changes.push({ kind: 'started', replica, shardId: st.id, nodeId, progress: st.download });
        continue;
      }
      this.coming.delete(st.id);
      const failure = downloadFailure(st, replica);
      const recorded = this.recorded.get(st.id) ?? { nodeId };
      this.recorded.set(st.id, recorded);
      const error = replica.shards.find((s) => s.id === st.id)?.error;
      const one = { replica, shardId: st.id, nodeId, ...(before ? { progress: before.progress, tookMs: nowMs - before.sinceMs } : {}) };
      if (failure !== undefined) {
        // Once per failure: a shard that waits to retry, or failed for good, reports it at every beat.
        if (recorded.failed !== failure) changes.push({ kind: 'failed', ...one, error: failure });
        recorded.failed = failure;
        continue;
      }
      delete recorded.failed;
      const fetched = st.fetched ? `${st.fetched.bytes}/${st.fetched.ms}` : undefined;
      if (st.fetched && fetched !== recorded.fetched) {
        recorded.fetched = fetched;
        changes.push({ kind: 'finished', ...one, bytes: st.fetched.bytes, tookMs: st.fetched.ms });
        continue;
      }
      // From agents older than `fetched`, and a hub download an engine makes: it ended as its progress went.
      if (!before || st.fetched) continue;
      if (st.state === 'failed') changes.push({ kind: 'failed', ...one, ...(error ? { error } : {}) });
      else if (st.state !== 'stopped') changes.push({ kind: 'finished', ...one });
    }
    for (const [id, c] of this.coming) if (c.nodeId === nodeId && !seen.has(id)) this.coming.delete(id);
    for (const [id, r] of this.recorded) if (r.nodeId === nodeId && !seen.has(id)) this.recorded.delete(id);
    return changes;
  }
}
