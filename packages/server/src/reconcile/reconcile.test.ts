import { describe, expect, it } from '@jest/globals';
import type { Replica } from '../domain.js';
import { reconcile, type ModelLoad } from './reconcile.js';
import { makeModel, makeNode, makeProfile, makeReplica } from '../../test/factories.js';
import { created, removed, snapshot, updated } from './fixtures.js';

const input = snapshot;

describe('reconcile: keeping models at their target', () => {
  it('creates the missing replicas and records the attempt', () => {
    const r = reconcile(input({ models: [makeModel({ scaling: { min: 2, max: 2 } })] }));
    expect(created(r)).toHaveLength(2);
    // Spread: two replicas of one model on two nodes.
    expect(new Set(created(r).map((x) => x.shards[0]!.nodeId))).toEqual(new Set(['node-1', 'node-2']));
    expect(created(r).every((x) => x.state === 'pending')).toBe(true);
    expect(r.attempts.get('qwen-coder-14b')?.placement).toBeDefined();
  });

  it('waits one pass for a model whose memory estimate is on its way', () => {
    expect(created(reconcile(input({ defer: new Set(['qwen-coder-14b']) })))).toEqual([]);
  });

  it('removes replicas of models that left the catalog', () => {
    const r = reconcile(input({ models: [], replicas: [makeReplica({ model: 'gone' })] }));
    expect(removed(r)).toEqual([{ id: 'r-1', reason: 'model gone is no longer in the catalog' }]);
  });

  it('keeps a failed replica during its backoff, then replaces it elsewhere', () => {
    const failed = makeReplica({ state: 'failed', error: 'exited 1', createdAtMs: 1_000_000 - 10_000 });
    expect(created(reconcile(input({ replicas: [failed] })))).toHaveLength(0);
    const later = reconcile(input({ replicas: [failed], nowMs: 1_000_000 + 30_000 }));
    expect(removed(later).map((x) => x.id)).toEqual(['r-1']);
    expect(created(later)).toHaveLength(1);
  });
});

describe('reconcile: drains start before they stop', () => {
  const draining = [makeNode({ id: 'node-1', admin: 'draining' }), makeNode({ id: 'node-2' })];

  it('starts a replacement elsewhere and leaves the old replica serving', () => {
    const r = reconcile(input({ nodes: draining, replicas: [makeReplica()] }));
    expect(removed(r)).toEqual([]);
    expect(created(r)).toHaveLength(1);
    expect(created(r)[0]).toMatchObject({ replaces: 'r-1', shards: [expect.objectContaining({ nodeId: 'node-2' })] });
  });

  it('moves traffic only after the replacement has been ready for the minimum healthy time', () => {
    const repl = (readySinceMs: number): Replica =>
      makeReplica({
        id: 'r-2',
        replaces: 'r-1',
        readySinceMs,
        shards: [{ id: 'r-2-0', nodeId: 'node-2', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }],
      });
    const young = reconcile(input({ nodes: draining, replicas: [makeReplica(), repl(1_000_000 - 1_000)] }));
    expect(updated(young)).toEqual([]);
    const healthy = reconcile(input({ nodes: draining, replicas: [makeReplica(), repl(1_000_000 - 5_000)] }));
    expect(updated(healthy)).toEqual([expect.objectContaining({ id: 'r-1', state: 'draining', drainStartedMs: 1_000_000 })]);
    expect(created(healthy)).toEqual([]);
  });

  it('removes the stepped-down replica once its requests finish, or at the drain timeout', () => {
    const old = makeReplica({ state: 'draining', drainStartedMs: 1_000_000 - 1_000, drainReason: 'node node-1 drained' });
    const busy = reconcile(input({ nodes: draining, replicas: [old], inFlight: new Map([['r-1', 2]]) }));
    expect(removed(busy)).toEqual([]);
    expect(removed(reconcile(input({ nodes: draining, replicas: [old], inFlight: new Map() })))).toEqual([{ id: 'r-1', reason: 'node node-1 drained' }]);
    expect(removed(reconcile(input({ nodes: draining, replicas: [old], inFlight: new Map([['r-1', 2]]), nowMs: 1_000_000 + 60_000 })))).toHaveLength(1);
  });

  it('says why when there is no room, and keeps the replica', () => {
    const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 48 })] });
    const nodes = [makeNode({ id: 'node-1', admin: 'draining' }), makeNode({ id: 'node-2', memoryTotalMb: 32 * 1024 })];
    const r = reconcile(input({ models: [model], nodes, replicas: [makeReplica({ memoryMb: 48 * 1024 })] }));
    expect(removed(r)).toEqual([]);
    expect(created(r)).toEqual([]);
    expect(updated(r)[0]!.drainBlocked).toMatch(/^0\/2 nodes can run qwen-coder-14b/);
  });

  it('with --force stops at once, and a replica not yet serving is stopped at once too', () => {
    const forced = [makeNode({ id: 'node-1', admin: 'draining', drainForce: true }), makeNode({ id: 'node-2' })];
    expect(removed(reconcile(input({ nodes: forced, replicas: [makeReplica()] })))[0]!.reason).toMatch(/--force/);
    const starting = reconcile(input({ nodes: draining, replicas: [makeReplica({ state: 'starting' })] }));
    expect(removed(starting)[0]!.reason).toMatch(/not serving yet/);
    expect(created(starting)).toHaveLength(1);
  });
});

describe('reconcile: lost nodes', () => {
  it('replaces replicas of a lost node', () => {
    const nodes = [makeNode({ id: 'node-1', liveness: 'lost', lastSeenAgoS: 400 }), makeNode({ id: 'node-2' }), makeNode({ id: 'node-3' })];
    const r = reconcile(input({ nodes, replicas: [makeReplica()] }));
    expect(removed(r)).toEqual([{ id: 'r-1', reason: 'node node-1 is lost (silent 400s); replacing elsewhere' }]);
    expect(created(r)[0]!.shards[0]!.nodeId).not.toBe('node-1');
    expect(r.paused).toBeUndefined();
  });

  it('pauses replacement when too much of the fleet goes silent at once', () => {
    const nodes = [makeNode({ id: 'node-1', liveness: 'lost' }), makeNode({ id: 'node-2', liveness: 'lost' }), makeNode({ id: 'node-3' })];
    const r = reconcile(input({ nodes, replicas: [makeReplica()] }));
    expect(removed(r)).toEqual([]);
    expect(created(r)).toEqual([]);
    expect(r.paused).toMatch(/^2 of 3 nodes went silent/);
  });
});

describe('reconcile: autoscaling', () => {
  const scaled = makeModel({ scaling: { min: 1, max: 3, target_in_flight: 2, scale_down_delay_s: 60 } });
  const load = (inFlight: number, extra: Partial<ModelLoad> = {}) => new Map([['qwen-coder-14b', { inFlight, waiting: 0, ...extra }]]);

  it('scales up with in-flight load, capped at max', () => {
    expect(created(reconcile(input({ models: [scaled], replicas: [makeReplica()], load: load(5) })))).toHaveLength(2);
    expect(reconcile(input({ models: [scaled], replicas: [makeReplica()], load: load(50) })).desired.get('qwen-coder-14b')).toBe(3);
  });

  it('scales down only after the load stayed low for the window, newest first', () => {
    const replicas = [makeReplica({ id: 'old', createdAtMs: 1 }), makeReplica({ id: 'new', createdAtMs: 2 })];
    const first = reconcile(input({ models: [scaled], replicas, load: load(0) }));
    expect(updated(first)).toEqual([]);
    expect(first.lowSince.get('qwen-coder-14b')).toBe(1_000_000);
    const later = reconcile(input({ models: [scaled], replicas, load: load(0), lowSince: first.lowSince, nowMs: 1_000_000 + 60_000 }));
    expect(updated(later).map((u) => [u.id, u.state])).toEqual([['new', 'draining']]);
  });

  it('with min 0: nothing while idle, one replica for a waiting request, zero after the idle timeout', () => {
    const lazy = makeModel({ scaling: { min: 0, max: 1, idle_timeout_s: 10 } });
    expect(created(reconcile(input({ models: [lazy] })))).toEqual([]);
    expect(created(reconcile(input({ models: [lazy], load: load(0, { waiting: 1 }) })))).toHaveLength(1);
    const busy = reconcile(input({ models: [lazy], replicas: [makeReplica()], load: load(0, { lastRequestMs: 1_000_000 - 5_000 }) }));
    expect(updated(busy)).toEqual([]);
    const idle = reconcile(input({ models: [lazy], replicas: [makeReplica()], load: load(0, { lastRequestMs: 1_000_000 - 10_000 }) }));
    expect(updated(idle).map((u) => [u.id, u.state, u.drainReason])).toEqual([['r-1', 'draining', 'idle for 10s (min 0)']]);
  });
});

describe('reconcile: replacing a failed replica', () => {
  it('places the replacement away from the node the replica just failed on, in the pass that removes it', () => {
    const failed = makeReplica({ state: 'failed', shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'failed' }] });
    const r = reconcile(input({ replicas: [failed] }));
    expect(removed(r).map((x) => x.id)).toEqual(['r-1']);
    expect(created(r).map((x) => x.shards[0]!.nodeId)).toEqual(['node-2']);
  });
});
