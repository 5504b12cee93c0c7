import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { AdminState, Replica } from '../domain.js';
import { DomainError } from '../errors.js';
import { Inventory } from '../inventory.js';
import type { Fence } from '../store/store.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import type { CatalogView } from './controller.js';
import { SharedController } from './shared.js';

/**
 * One instance among several: a store shared with others (the database's replicas are
 * `db`), a lease this test hands out and takes back, and what the instance writes.
 */
function instance(db: Map<string, Replica> = new Map()) {
  let fence: Fence | undefined;
  const writes: { save: string[]; remove: string[]; fence?: Fence }[] = [];
  let refuse = false;
  const store = memoryStore({
    loadReplicas: async () => [...db.values()],
    writeReplicas: async (save, remove, f) => {
      if (refuse) throw new DomainError('not_leader', 'this instance is no longer the leader');
      writes.push({ save: save.map((r) => r.id), remove: [...remove], ...(f ? { fence: f } : {}) });
      for (const r of save) db.set(r.id, r);
      for (const id of remove) db.delete(id);
    },
  });
  const model = makeModel({ scaling: { min: 1, max: 1 } });
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
  const leadership = { isLeader: () => fence !== undefined, fence: () => fence };
  const ctl = new SharedController(
    new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }, Date.now(), [], { shared: true }),
    store,
    catalog,
    opts,
    pino({ level: 'silent' }),
    leadership,
    [...db.values()],
  );
  const decided: unknown[] = [];
  ctl.events.on('decided', (d) => decided.push(...d));
  // A pass is asynchronous on a shared store: let it run to its end.
  const pass = async () => {
    ctl.reconcileNow();
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  return { ctl, db, writes, decided, pass, lead: (f?: Fence) => (fence = f), refuse: (r: boolean) => (refuse = r) };
}

const beat = (ctl: SharedController) => ctl.heartbeat({ report: makeReport({ node_id: 'node-1', memory_total_mb: 65536 }), shards: [] });

describe('SharedController', () => {
  it('a follower plans nothing and writes nothing; a leader writes its plan under its fence before handing it out', async () => {
    const i = instance();
    beat(i.ctl);
    await i.pass();
    expect([i.writes, i.ctl.listReplicas(), i.ctl.assignments('node-1').assignments]).toEqual([[], [], []]);
    i.lead({ holder: 'a', epoch: 3 });
    await i.pass();
    const [r] = i.ctl.listReplicas();
    expect(i.writes).toEqual([{ save: [r!.id], remove: [], fence: { holder: 'a', epoch: 3 } }]);
    expect(i.ctl.assignments('node-1').assignments).toHaveLength(1);
    expect(i.decided).toHaveLength(1);
  });

  it('a leader whose fenced write is refused acts on nothing: no assignment, no event, memory back to the database', async () => {
    const i = instance();
    beat(i.ctl);
    i.lead({ holder: 'a', epoch: 3 });
    i.refuse(true);
    await i.pass();
    expect([i.ctl.listReplicas(), i.ctl.assignments('node-1').assignments, i.decided]).toEqual([[], [], []]);
  });

  it('a new term starts from the database: a replica the last leader wrote is not placed twice', async () => {
    const i = instance();
    beat(i.ctl);
    // The last leader placed the model; this instance has not reloaded since.
    const other = makeReplica({ id: 'r-other', shards: [{ id: 'r-other-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }] });
    i.db.set(other.id, other);
    i.lead({ holder: 'b', epoch: 4 });
    await i.pass();
    expect(i.ctl.listReplicas().map((r) => r.id)).toEqual(['r-other']);
    expect(i.writes).toEqual([]);
  });

  it('a leader ignores a reload that read the database before its own write committed: the replica is not placed twice', async () => {
    const i = instance();
    beat(i.ctl);
    i.lead({ holder: 'a', epoch: 3 });
    await i.pass();
    const placed = i.ctl.listReplicas().map((r) => r.id);
    expect(placed).toHaveLength(1);
    // A NOTIFY's reload whose read began before that write committed: it sees no replica.
    const committed = new Map(i.db);
    i.db.clear();
    const late = i.ctl.reloadReplicas();
    for (const [id, r] of committed) i.db.set(id, r);
    await late;
    await i.pass();
    expect(i.ctl.listReplicas().map((r) => r.id)).toEqual(placed);
    expect(i.writes).toHaveLength(1);
  });

  it('a wrong-shaped node row from the database fails the pass, not the process', async () => {
    const i = instance();
    beat(i.ctl);
    i.lead({ holder: 'a', epoch: 3 });
    // Hand-edited: UPDATE nodes SET admin = 'null'.
    i.ctl.applyRemoteNode({ id: 'node-2', admin: null as unknown as AdminState }, Date.now());
    await expect((i.ctl as unknown as { sharedPass(): Promise<void> }).sharedPass()).resolves.toBeUndefined();
  });

  it('a follower takes the replicas the leader wrote, with the shard statuses it has heard since', async () => {
    const i = instance();
    const r = makeReplica({
      id: 'r-1',
      state: 'starting',
      shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }],
    });
    i.ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    i.db.set(r.id, r);
    await i.ctl.reloadReplicas();
    expect(i.ctl.listReplicas()).toEqual([expect.objectContaining({ id: 'r-1', state: 'ready', endpoint: 'http://10.0.0.1:40001' })]);
    expect(i.ctl.routes(r.model)).toHaveLength(1);
    // Its engine fails: the follower routes around it, but the record is the leader's to write.
    i.ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'failed', error: 'exit 1' }] });
    await i.pass();
    expect(i.ctl.routes(r.model)).toHaveLength(0);
    expect(i.writes).toEqual([]);
  });

  it('a pulled row older than a heartbeat heard here since does not undo its shard statuses', async () => {
    const i = instance();
    const r = makeReplica({
      id: 'r-1',
      state: 'starting',
      shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }],
    });
    i.db.set(r.id, r);
    await i.ctl.reloadReplicas();
    const now = Date.now();
    i.ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    // The database's row is from the heartbeat before (the batch was written, then pulled).
    i.ctl.applyRemoteNode(
      { id: 'node-1', admin: { state: 'ready' }, report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'starting' }] },
      now - 1000,
    );
    expect(i.ctl.routes(r.model)).toHaveLength(1);
    // A newer one (the agent moved to another instance) counts.
    i.ctl.applyRemoteNode(
      {
        id: 'node-1',
        admin: { state: 'ready' },
        report: makeReport({ node_id: 'node-1' }),
        shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'failed', error: 'exit 1' }],
      },
      Date.now() + 1000,
    );
    expect(i.ctl.routes(r.model)).toHaveLength(0);
  });
});
