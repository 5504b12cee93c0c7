import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Controller, type CatalogView } from './controller.js';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeProfile, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';

function controller(replicas: Replica[], model = makeModel()): Controller {
  const store = memoryStore({ replicas });
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
  return new Controller(new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }), store, catalog, opts, pino({ level: 'silent' }), replicas);
}

describe('Controller', () => {
  it('routes to the new port when a ready engine restarted on another port between two heartbeats', () => {
    const ctl = controller([
      makeReplica({ state: 'starting', shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }] }),
    ]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    expect(ctl.routes('qwen-coder-14b')).toEqual([expect.objectContaining({ replicaId: 'r-1', endpoint: 'http://10.0.0.1:40001' })]);
    // The engine crashed and the agent restarted it on another port; both reports say ready.
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40002, restarts: 1 }] });
    expect(ctl.routes('qwen-coder-14b')).toEqual([expect.objectContaining({ replicaId: 'r-1', endpoint: 'http://10.0.0.1:40002' })]);
  });

  it('does not hand a new multi-node replica a master port that a replica from before a restart still uses', () => {
    const existing = makeReplica({ id: 'r-old', masterPort: 29500 });
    const ctl = controller([existing]);
    const port = (ctl as unknown as { allocateMasterPort(): number }).allocateMasterPort();
    expect(port).not.toBe(29500);
  });
});

describe('Controller: one channel for assignments', () => {
  const starting = () =>
    makeReplica({ state: 'starting', shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }] });

  it('acknowledges a heartbeat with what to size, and hands out assignments only on the long-poll', async () => {
    const gguf = makeModel({ profiles: [makeProfile({ engine: 'node-llama-cpp', source: 'tiny.gguf' })] });
    const ctl = controller([starting()], gguf);
    expect(ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [] })).toEqual({ node_id: 'node-1', estimate_sources: ['tiny.gguf'] });
    ctl.reconcileNow();
    // A just-started agent asks with -1 and gets the current assignments at once.
    const first = await ctl.waitForAssignments('node-1', -1, 60_000);
    expect(first.assignments.map((a) => [a.id, a.engine, a.source])).toEqual([['r-1-0', 'node-llama-cpp', 'tiny.gguf']]);
    // Asking with the current version waits for a change (here: none, so the timeout).
    const same = await ctl.waitForAssignments('node-1', first.version, 10);
    expect(same.version).toBe(first.version);
  });

  it('keeps running what a replica was created with when the catalog changes under it', async () => {
    const ctl = controller([starting()]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [] });
    const before = await ctl.waitForAssignments('node-1', -1, 60_000);
    const edited = makeModel({ profiles: [makeProfile({ args: ['--new'] })] });
    ctl.setCatalog({ models: [edited], resolve: () => edited, suggest: () => [] });
    expect(ctl.assignments('node-1').assignments[0]!.args).toEqual(before.assignments[0]!.args);
  });

  it('never changes a replica it handed out: a heartbeat replaces it', () => {
    const ctl = controller([starting()]);
    const [handedOut] = ctl.listReplicas();
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    expect(handedOut!.state).toBe('starting');
    expect(handedOut!.shards[0]!.state).toBe('starting');
    expect(ctl.listReplicas()[0]).toMatchObject({ state: 'ready', endpoint: 'http://10.0.0.1:40001' });
  });

  it('gives the replicas a plan creates their ids when it applies the plan', () => {
    const ctl = controller([]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1', memory_total_mb: 8192 }), shards: [] });
    ctl.reconcileNow();
    const [created] = ctl.listReplicas();
    expect(created!.id).toMatch(/^r-[0-9a-f]{8}$/);
    expect(created!.shards.map((s) => s.id)).toEqual([`${created!.id}-0`]);
    expect(created!.masterPort).toBeUndefined();
    expect(ctl.assignments('node-1').assignments.map((a) => a.replica_id)).toEqual([created!.id]);
  });
});

describe('Controller: what a heartbeat asks of the reconciler', () => {
  class Counting extends Controller {
    count = 0;
    override reconcileNow(): void {
      this.count++;
      super.reconcileNow();
    }
  }
  const turn = () => new Promise((r) => setImmediate(r));

  it('plans at once for a node that comes and a shard that changes state, and at a bounded rate for a changed report', async () => {
    const replica = makeReplica({ state: 'starting', shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }] });
    const store = memoryStore({ replicas: [replica] });
    const model = makeModel();
    const catalog: CatalogView = { models: [model], resolve: () => model, suggest: () => [] };
    const opts = {
      reconcileIntervalMs: 60_000,
      reportPassMs: 60_000,
      drainParallel: 1,
      minHealthyMs: 0,
      drainTimeoutMs: 60_000,
      maxLostFraction: 0.5,
      failedBackoffMs: 30_000,
    };
    const ctl = new Counting(new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }), store, catalog, opts, pino({ level: 'silent' }), [
      replica,
    ]);
    const beat = (memUsed: number, state: 'starting' | 'ready') =>
      ctl.heartbeat({
        report: makeReport({ node_id: 'node-1', memory_total_mb: 65536 + memUsed }),
        shards: [{ id: 'r-1-0', replica_id: 'r-1', state, port: 40001 }],
      });
    beat(0, 'starting'); // the node's first heartbeat
    await turn();
    expect(ctl.count).toBe(1);
    beat(1, 'starting'); // a new report, the same shard state
    beat(2, 'starting');
    await turn();
    expect(ctl.count).toBe(1);
    beat(2, 'ready'); // the engine is up: traffic may go there now
    await turn();
    expect(ctl.count).toBe(2);
    expect(ctl.routes('qwen-coder-14b')).toHaveLength(1);
    ctl.stop();
  });
});
