import { describe, expect, it } from '@jest/globals';
import type { Shard } from '../domain.js';
import { makeReplica } from '../../test/factories.js';
import { applyShardReports, hostForUrl, mergeShardReport, replicaStatus } from './replica-status.js';

const shard = (rank: number, extra: Partial<Shard> = {}): Shard => ({
  id: `r-1-${rank}`,
  nodeId: `node-${rank + 1}`,
  rank,
  gpuUuids: [],
  gpuIndices: [],
  state: 'pending',
  ...extra,
});

describe('mergeShardReport', () => {
  it('takes the reported state, port, pid, restarts and error, and says when nothing changed', () => {
    const s = shard(0, { state: 'starting', error: 'old' });
    expect(mergeShardReport(s, { id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 4000, pid: 7, restarts: 1 })).toEqual({
      ...shard(0),
      state: 'ready',
      port: 4000,
      pid: 7,
      restarts: 1,
    });
    const ready = shard(0, { state: 'ready', port: 4000 });
    expect(mergeShardReport(ready, { id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 4000 })).toBeUndefined();
  });

  it('keeps the state the server knows when the agent says stopped, and does not change its argument', () => {
    const s = Object.freeze(shard(0, { state: 'ready', port: 4000 }));
    expect(mergeShardReport(s, { id: 'r-1-0', replica_id: 'r-1', state: 'stopped', port: 4000, error: 'exit 0' })).toMatchObject({
      state: 'ready',
      error: 'exit 0',
    });
  });
});

describe('replicaStatus', () => {
  const at = (states: Shard['state'][], extra = {}) =>
    makeReplica({ state: 'starting', shards: states.map((state, rank) => shard(rank, { state, port: 4000 + rank })), ...extra });

  it('is failed when any shard failed, naming the first one', () => {
    const r = replicaStatus(at(['ready', 'failed']), 5, '10.0.0.1');
    expect(r).toMatchObject({ state: 'failed', error: 'shard 1 on node-2: failed' });
  });

  it('is ready once every shard is, since now, with rank 0 as its endpoint', () => {
    const r = replicaStatus(at(['ready', 'ready'], { error: 'before' }), 5, 'fd00::1');
    expect(r).toMatchObject({ state: 'ready', readySinceMs: 5, endpoint: 'http://[fd00::1]:4000' });
    expect(r.error).toBeUndefined();
    expect(replicaStatus({ ...r, shards: r.shards }, 9, 'fd00::1').readySinceMs).toBe(5);
  });

  it('is starting while any shard runs, and keeps the server’s own draining and stopped', () => {
    expect(replicaStatus(at(['starting', 'pending'], { state: 'pending' }), 5, 'h').state).toBe('starting');
    expect(replicaStatus(at(['pending'], { state: 'pending' }), 5, 'h').state).toBe('pending');
    const draining = at(['failed'], { state: 'draining' });
    expect(replicaStatus(draining, 5, 'h')).toBe(draining);
  });
});

describe('applyShardReports', () => {
  it('applies a node’s reports about its own shards only, and returns a new replica', () => {
    const r = Object.freeze(makeReplica({ state: 'pending', shards: [shard(0), shard(1)] }));
    const next = applyShardReports(
      r,
      'node-1',
      [
        { id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 4000 },
        { id: 'r-1-1', replica_id: 'r-1', state: 'ready', port: 4001 },
      ],
      5,
      '10.0.0.1',
    );
    expect(next?.shards.map((s) => s.state)).toEqual(['ready', 'pending']);
    expect(next?.state).toBe('starting');
    expect(r.shards[0]!.state).toBe('pending');
    expect(applyShardReports(r, 'node-3', [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready' }], 5, 'h')).toBeUndefined();
  });
});

describe('hostForUrl', () => {
  it('brackets IPv6 addresses once', () => {
    expect([hostForUrl('10.0.0.1'), hostForUrl('fd00::1'), hostForUrl('[fd00::1]')]).toEqual(['10.0.0.1', '[fd00::1]', '[fd00::1]']);
  });
});
