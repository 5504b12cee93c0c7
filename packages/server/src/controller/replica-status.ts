import { redactSecrets, redactUrls, type Heartbeat, type ShardStatus } from '@llmgw/shared';
import type { Replica, Shard } from '../domain.js';

/**
 * A shard as its agent's report leaves it, or undefined when the report changes
 * nothing. `stopped` is not a shard state the server keeps: the replica's own state
 * says whether it is meant to run. A port, pid or restart count the report leaves out
 * stays as it was. A report from a heartbeat older (`seq`) than the one that set the
 * shard changes nothing: readiness only moves on newer information.
 */
export function mergeShardReport(shard: Shard, st: ShardStatus, seq?: number): Shard | undefined {
  if (seq !== undefined && shard.reportSeq !== undefined && seq < shard.reportSeq) return undefined;
  const state = st.state === 'stopped' ? shard.state : st.state;
  if (state === shard.state && st.port === shard.port && st.pid === shard.pid && st.error === shard.error && st.restarts === shard.restarts) return undefined;
  const next: Shard = {
    ...shard,
    state,
    ...(st.port !== undefined ? { port: st.port } : {}),
    ...(st.pid !== undefined ? { pid: st.pid } : {}),
    ...(st.restarts !== undefined ? { restarts: st.restarts } : {}),
    ...(seq !== undefined ? { reportSeq: seq } : {}),
  };
  if (st.error) next.error = st.error;
  else delete next.error;
  return next;
}

/**
 * A replica's state as its shards make it: failed if any failed, ready once all are,
 * starting while any runs. Draining and stopped are the server's decisions and are kept.
 * A ready replica's endpoint is its rank-0 shard's port at `headAddr`, that shard's node.
 */
export function replicaStatus(r: Replica, nowMs: number, headAddr: string): Replica {
  if (r.state === 'draining' || r.state === 'stopped') return r;
  const next: Replica = { ...r };
  if (r.shards.some((s) => s.state === 'failed')) {
    const bad = r.shards.find((s) => s.state === 'failed');
    next.state = 'failed';
    next.error = `shard ${bad?.rank} on ${bad?.nodeId}: ${bad?.error ?? 'failed'}`;
  } else if (r.shards.every((s) => s.state === 'ready')) {
    if (r.state !== 'ready') next.readySinceMs = nowMs;
    next.state = 'ready';
    delete next.error;
  } else if (r.shards.some((s) => s.state === 'starting' || s.state === 'ready')) {
    next.state = 'starting';
  }
  const head = r.shards.find((s) => s.rank === 0);
  if (next.state === 'ready' && head?.port) next.endpoint = `http://${hostForUrl(headAddr)}:${head.port}`;
  return next;
}

/**
 * `r` after the reports of node `nodeId` about its shards, or undefined when they change
 * nothing. Reports about shards that are not on that node are ignored: a node speaks
 * only for itself.
 */
export function applyShardReports(
  r: Replica,
  nodeId: string,
  reports: readonly ShardStatus[],
  nowMs: number,
  headAddr: string,
  seq?: number,
): Replica | undefined {
  let shards: Shard[] | undefined;
  for (const st of reports) {
    const current = shards ?? r.shards;
    const i = current.findIndex((s) => s.id === st.id && s.nodeId === nodeId);
    const shard = current[i];
    if (!shard) continue;
    const merged = mergeShardReport(shard, st, seq);
    if (!merged) continue;
    shards = current.map((s, j) => (j === i ? merged : s));
  }
  return shards ? replicaStatus({ ...r, shards }, nowMs, headAddr) : undefined;
}

/** An IPv6 address in a URL needs brackets. */
export function hostForUrl(addr: string): string {
  return addr.includes(':') && !addr.startsWith('[') ? `[${addr}]` : addr;
}

/** A shard's report with the replica's engine key masked in its error and log tail. */
export function maskKey(st: ShardStatus, key: string): ShardStatus {
  return {
    ...st,
    ...(st.error !== undefined ? { error: redactUrls(redactSecrets(st.error, [key])) } : {}),
    ...(st.log_tail !== undefined ? { log_tail: redactUrls(redactSecrets(st.log_tail, [key])) } : {}),
  };
}

/**
 * A heartbeat's shard statuses applied to the replicas they belong to; returns each
 * replica that changed, before and after. An agent masks the key, but engine output is
 * not ours to trust: what an agent sends is shown by ctl logs and replicas and written to
 * the log, so it is masked here too. `logTail` gets the tails of this node's own shards.
 * `addrOf` gives a node's address, for a replica whose head is on another node.
 */
export function applyHeartbeatShards(
  replicas: ReadonlyMap<string, Replica>,
  nodeId: string,
  hb: Heartbeat,
  nowMs: number,
  addrOf: (nodeId: string) => string | undefined,
  logTail: (shardId: string, tail: string) => void,
): Array<{ before: Replica; after: Replica }> {
  const byReplica = new Map<string, ShardStatus[]>();
  for (const st of hb.shards) byReplica.set(st.replica_id, [...(byReplica.get(st.replica_id) ?? []), st]);
  const out: Array<{ before: Replica; after: Replica }> = [];
  for (const [id, raw] of byReplica) {
    const before = replicas.get(id);
    if (!before) continue;
    const reports = raw.map((st) => maskKey(st, before.apiKey));
    for (const st of reports) {
      if (st.log_tail !== undefined && before.shards.some((s) => s.id === st.id && s.nodeId === nodeId)) logTail(st.id, st.log_tail);
    }
    const head = before.shards.find((s) => s.rank === 0);
    const headAddr = (head && addrOf(head.nodeId)) ?? hb.report.mgmt_addr;
    const after = applyShardReports(before, nodeId, reports, nowMs, headAddr, hb.seq);
    if (after) out.push({ before, after });
  }
  return out;
}
