import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Controller, type CatalogView } from './controller.js';
import { engineKeys } from './engine-keys.js';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';

const keyOf = engineKeys('the secret in <data-dir>/engine-key-secret');

function controller(replicas: Replica[]): Controller {
  const model = makeModel();
  const store = memoryStore({ replicas });
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = {
    reconcileIntervalMs: 60_000,
    drainParallel: 1,
    minHealthyMs: 0,
    drainTimeoutMs: 60_000,
    maxLostFraction: 0.5,
    failedBackoffMs: 30_000,
    engineKey: keyOf,
  };
  return new Controller(new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }), store, catalog, opts, pino({ level: 'silent' }), replicas);
}

describe('engine keys in the controller', () => {
  it('a loaded replica gets its derived key, also over one an older server stored', async () => {
    const ctl = controller([makeReplica({ id: 'r-1', apiKey: 'sk-old-stored-key' })]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [] });
    const { assignments } = await ctl.waitForAssignments('node-1', -1, 60_000);
    expect(assignments.map((a) => a.api_key)).toEqual([keyOf('r-1')]);
  });

  it('masks the key in what an agent reports, whatever the agent did', () => {
    const ctl = controller([makeReplica({ id: 'r-1' })]);
    const key = keyOf('r-1');
    ctl.heartbeat({
      report: makeReport({ node_id: 'node-1' }),
      shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'failed', error: `exited; last log lines:\napi_key=${key}`, log_tail: `args: --api-key ${key}\n` }],
    });
    expect(ctl.logTail('r-1-0')).toBe('args: --api-key ***\n');
    expect(JSON.stringify(ctl.listReplicas())).not.toContain(`=${key}`);
    expect(ctl.listReplicas()[0]!.error).toContain('api_key=***');
  });
});
