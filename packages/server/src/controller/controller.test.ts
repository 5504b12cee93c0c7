import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Controller, type CatalogView } from './controller.js';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeReplica, makeReport, memoryStore } from '../../test/factories.js';

function controller(replicas: Replica[]): Controller {
  const store = memoryStore({ replicas });
  const model = makeModel();
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
  return new Controller(new Inventory(store, { notReadyAfterS: 15, lostAfterS: 60 }), store, catalog, opts, pino({ level: 'silent' }));
}

describe('Controller', () => {
  it('routes to the new port when a ready engine restarted on another port between two heartbeats', () => {
    const ctl = controller([makeReplica({ state: 'starting', shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }] })]);
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
