import { describe, expect, it } from '@jest/globals';
import type { ShardStatus } from '@llmgw/shared';
import pino from 'pino';
import type { Replica, Shard } from '../domain.js';
import { Inventory } from '../inventory.js';
import type { Fence, StoredNode } from '../store/store.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import type { CatalogView } from './controller.js';
import { SharedController } from './shared.js';

/**
 * Issue 28: a replica's readiness only moves on newer information. Every heartbeat has a
 * `seq`; a report, a pulled node row, a reloaded replica record or a restart's stored one
 * never replaces what a heartbeat of a higher `seq` set, whatever the clocks say.
 */

const model = makeModel({ scaling: { min: 1, max: 1 } });
const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };

const shard = (over: Partial<Shard> = {}): Shard => ({ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting', ...over });
const status = (state: ShardStatus['state']): ShardStatus[] => [{ id: 'r-1-0', replica_id: 'r-1', state, port: 40001 }];
const row = (seq: number, state: ShardStatus['state']): StoredNode => ({
  id: 'node-1',
  admin: { state: 'ready' },
  report: makeReport({ node_id: 'node-1' }),
  shards: status(state),
  seq,
});

/** A follower over `db` (the database's replica records), its inventory booted at `bootMs` over `nodes`. */
function follower(db: Map<string, Replica>, nodes: StoredNode[] = [], bootMs = Date.now()) {
  const store = memoryStore({ loadReplicas: async () => [...db.values()] });
  const inventory = new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }, bootMs, nodes, { shared: true });
  const fence: Fence | undefined = undefined;
  const ctl = new SharedController(inventory, store, catalog, opts, pino({ level: 'silent' }), { isLeader: () => false, fence: () => fence }, [...db.values()]);
  const states: string[] = [];
  ctl.events.on('replicas', () => states.push(ctl.listReplicas()[0]?.state ?? 'none'));
  const state = () => ctl.listReplicas()[0]?.state;
  return { ctl, states, state, beat: (seq: number, s: ShardStatus['state']) => ctl.heartbeat({ report: makeReport(), shards: status(s), seq }) };
}

describe('readiness only moves forward', () => {
  it('a pulled row of an older heartbeat never undoes readiness, even one the database saw later', () => {
    const f = follower(new Map([['r-1', makeReplica({ id: 'r-1', model: model.name, state: 'starting', shards: [shard()] })]]));
    f.beat(11, 'starting');
    f.beat(12, 'ready');
    expect(f.state()).toBe('ready');
    // Seq 11 as this instance's own batch wrote it, pulled back with a database time past seq 12's arrival.
    f.ctl.applyRemoteNode(row(11, 'starting'), Date.now() + 400);
    expect(f.state()).toBe('ready');
    expect(f.states).not.toContain('starting');
    // A later heartbeat, through another instance, counts whatever its time.
    f.ctl.applyRemoteNode(row(13, 'failed'), Date.now() - 5_000);
    expect(f.state()).toBe('failed');
  });

  it('a heartbeat that arrives after a later one was heard changes nothing but liveness', () => {
    const f = follower(new Map([['r-1', makeReplica({ id: 'r-1', model: model.name, state: 'starting', shards: [shard()] })]]));
    f.ctl.applyRemoteNode(row(20, 'ready'), Date.now());
    expect(f.state()).toBe('ready');
    f.beat(19, 'starting');
    expect(f.state()).toBe('ready');
    // And a reload re-applies seq 20, not 19.
    return f.ctl.reloadReplicas().then(() => expect(f.state()).toBe('ready'));
  });

  it('a reload does not put back an older heartbeat over the newer state the leader wrote', async () => {
    const db = new Map<string, Replica>();
    const f = follower(db);
    db.set('r-1', makeReplica({ id: 'r-1', model: model.name, state: 'starting', shards: [shard()] }));
    await f.ctl.reloadReplicas();
    f.beat(30, 'starting');
    // The leader heard seq 31 (ready) and wrote it before this instance pulled that row.
    db.set(
      'r-1',
      makeReplica({
        id: 'r-1',
        model: model.name,
        state: 'ready',
        endpoint: 'http://10.0.0.1:40001',
        shards: [shard({ state: 'ready', port: 40001, reportSeq: 31 })],
      }),
    );
    f.states.length = 0;
    await f.ctl.reloadReplicas();
    expect(f.state()).toBe('ready');
    expect(f.states).toEqual(['ready']);
    // The pull then brings seq 31 itself: nothing moves.
    f.ctl.applyRemoteNode(row(31, 'ready'), Date.now());
    expect(f.state()).toBe('ready');
  });

  it('a restarted instance takes the pulled heartbeat its store row holds, and an older one never undoes it', () => {
    const bootMs = Date.now();
    const stored = makeReplica({
      id: 'r-1',
      model: model.name,
      state: 'ready',
      endpoint: 'http://10.0.0.1:40001',
      shards: [shard({ state: 'ready', port: 40001, reportSeq: 41 })],
    });
    const f = follower(new Map([['r-1', stored]]), [{ id: 'node-1', admin: { state: 'ready' }, report: makeReport() }], bootMs);
    // Before the restart the database saw seq 41; a slower instance's write of seq 40 comes after.
    f.ctl.applyRemoteNode(row(41, 'ready'), bootMs - 2_000);
    f.ctl.applyRemoteNode(row(40, 'starting'), bootMs + 100);
    expect(f.state()).toBe('ready');
    expect(f.states).not.toContain('starting');
    // Seq 41 seen before the boot proves nothing about now; seq 40's write, after it, does.
    expect(f.ctl.inventory.liveness(f.ctl.inventory.get('node-1')!, bootMs + 200)).toBe('ready');
  });

  it('without a seq (an older agent) reports are ordered by when they were seen, as before', () => {
    const f = follower(new Map([['r-1', makeReplica({ id: 'r-1', model: model.name, state: 'starting', shards: [shard()] })]]));
    f.ctl.heartbeat({ report: makeReport(), shards: status('ready') });
    f.ctl.applyRemoteNode({ id: 'node-1', admin: { state: 'ready' }, report: makeReport(), shards: status('starting') }, Date.now() - 1000);
    expect(f.state()).toBe('ready');
    f.ctl.applyRemoteNode({ id: 'node-1', admin: { state: 'ready' }, report: makeReport(), shards: status('failed') }, Date.now() + 1000);
    expect(f.state()).toBe('failed');
  });
});
