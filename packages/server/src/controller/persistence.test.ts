import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import type { Store } from '../store/store.js';
import { makeModel, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import { Controller, type CatalogView } from './controller.js';

/**
 * How the controller and the inventory write to the store: one batch per
 * reconcile pass, memory as the source of truth while the store refuses writes, and
 * every record written once it takes them again.
 */
async function setup() {
  const saved = new Map<string, Replica>();
  const nodes = new Map<string, unknown>();
  let failing = false;
  const transactions: string[][] = [];
  const fail = () => {
    if (failing) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  };
  const store: Store = memoryStore({
    writeReplicas: async (save, remove) => {
      fail();
      transactions.push([...save.map((r) => `save ${r.id}`), ...remove.map((id) => `delete ${id}`)]);
      for (const r of save) saved.set(r.id, r);
      for (const id of remove) saved.delete(id);
    },
    saveNodeReports: async (rows) => {
      fail();
      for (const r of rows) nodes.set(r.id, r.report);
    },
  });
  const model = makeModel({ scaling: { min: 2, max: 2 } });
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
  const inventory = await Inventory.load(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 });
  const ctl = await Controller.load(inventory, store, catalog, opts, pino({ level: 'silent' }));
  return { ctl, inventory, saved, nodes, transactions, setFailing: (f: boolean) => (failing = f) };
}

describe('Controller persistence', () => {
  it('writes the replicas a reconcile pass creates in one transaction', async () => {
    const { ctl, saved, transactions } = await setup();
    ctl.heartbeat({ report: makeReport({ node_id: 'n1' }), shards: [] });
    ctl.reconcileNow();
    await ctl.persist();
    expect(ctl.listReplicas()).toHaveLength(2);
    // One transaction with both replicas (in creation order, which random ids do not sort).
    expect(transactions.filter((t) => t.length).map((t) => [...t].sort())).toEqual([
      ctl
        .listReplicas()
        .map((r) => `save ${r.id}`)
        .sort(),
    ]);
    expect([...saved.keys()].sort()).toEqual(
      ctl
        .listReplicas()
        .map((r) => r.id)
        .sort(),
    );
  });

  it('keeps a pass applied in memory when the store refuses it, and writes it once the store takes writes', async () => {
    const { ctl, inventory, saved, nodes, setFailing } = await setup();
    setFailing(true);
    expect(ctl.heartbeat({ report: makeReport({ node_id: 'n1' }), shards: [] })).toEqual(expect.objectContaining({ node_id: 'n1' }));
    expect(() => ctl.reconcileNow()).not.toThrow();
    // Memory is the source of truth: the node is live, the replicas placed and handed out.
    expect(inventory.liveness(inventory.get('n1')!, Date.now())).toBe('ready');
    const placed = ctl
      .listReplicas()
      .map((r) => r.id)
      .sort();
    expect(placed).toHaveLength(2);
    expect(ctl.assignments('n1').assignments).toHaveLength(2);
    expect([saved.size, nodes.size]).toEqual([0, 0]);
    expect(() => ctl.reconcileNow()).not.toThrow();

    setFailing(false);
    ctl.reconcileNow();
    await ctl.persist();
    await inventory.persistReports();
    expect([...saved.keys()].sort()).toEqual(placed);
    expect([...nodes.keys()]).toEqual(['n1']);
  });

  it('refuses an admin state change the store refuses, leaving the node as it was', async () => {
    const { ctl, inventory } = await setup();
    ctl.heartbeat({ report: makeReport({ node_id: 'n1' }), shards: [] });
    const store = (inventory as unknown as { store: Store }).store;
    store.saveNodeAdmin = () => Promise.reject(new Error('ENOSPC'));
    await expect(ctl.setNodeState('n1', 'cordoned', 'x')).rejects.toThrow('ENOSPC');
    expect(inventory.get('n1')!.admin.state).toBe('ready');
  });
});
