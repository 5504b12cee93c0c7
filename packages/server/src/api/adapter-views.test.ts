import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { checksumMismatchText, type Model } from '@llmgw/shared';
import { Controller, type CatalogView } from '../controller/controller.js';
import type { Replica, ReplicaSpec } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import { explainView, modelViews, replicaViews } from './views.js';

const SHA = 'ab'.repeat(32);
const model: Model = makeModel({
  adapters: [
    { name: 'sql-lora', source: 'https://files.invalid/sql.gguf', sha256: SHA },
    { name: 'chat-lora', source: '/m/chat.gguf' },
  ],
});
const spec = (adapters: string[]): ReplicaSpec => ({
  engine: 'llama.cpp',
  source: '/m.gguf',
  args: [],
  env: {},
  adapters: adapters.map((name) => ({ name, source: `/cache/${name}` })),
  maxLoadedAdapters: 2,
});

/** A controller over `replicas` of `model`, node-1 reporting its shards ready. */
function fleet(replicas: Replica[]) {
  const store = memoryStore({ replicas });
  const catalog: CatalogView = {
    models: [model],
    resolve: (n) => (n === model.name ? model : undefined),
    suggest: () => [],
    adapter: (n) => {
      const adapter = model.adapters?.find((a) => a.name === n);
      return adapter && { model, adapter };
    },
  };
  const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 1, failedBackoffMs: 30_000 };
  const ctl = new Controller(
    new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 600_000 }),
    store,
    catalog,
    opts,
    pino({ level: 'silent' }),
    replicas,
  );
  const onNode1 = replicas.filter((r) => r.state === 'ready' && r.shards[0]?.nodeId === 'node-1');
  ctl.heartbeat({
    report: makeReport({ node_id: 'node-1' }),
    shards: onNode1.map((r) => ({ id: `${r.id}-0`, replica_id: r.id, state: 'ready', port: 40001 })),
  });
  return ctl;
}

describe('adapter views (issue 31)', () => {
  it('lists each model adapter with the ready replicas the gateway takes to hold it, and each replica its loaded adapters', () => {
    const ctl = fleet([
      makeReplica({ id: 'r-1', endpoint: 'http://10.0.0.1:40001', spec: spec(['sql-lora', 'chat-lora']) }),
      makeReplica({ id: 'r-2', endpoint: 'http://10.0.0.1:40002', spec: spec(['sql-lora', 'chat-lora']) }),
    ]);
    const loaded = (id: string) => (id === 'r-1' ? ['chat-lora', 'sql-lora'] : id === 'r-2' ? ['sql-lora'] : []);
    expect(modelViews(ctl, true, loaded)[0]!.adapters).toEqual([
      { name: 'sql-lora', source: 'https://files.invalid/sql.gguf', loaded_on: ['r-1', 'r-2'] },
      { name: 'chat-lora', source: '/m/chat.gguf', loaded_on: ['r-1'] },
    ]);
    // A viewer sees a URL's host only, as for a model's source.
    expect(modelViews(ctl, false, loaded)[0]!.adapters?.[0]?.source).toBe('https://files.invalid/…');
    expect(replicaViews(ctl, undefined, false, loaded).map((r) => r.adapters)).toEqual([['chat-lora', 'sql-lora'], ['sql-lora']]);
  });

  it('shows no adapters on a model or replica without them', () => {
    const ctl = fleet([makeReplica({ id: 'r-1', model: 'other', endpoint: 'http://10.0.0.1:40001' })]);
    expect(replicaViews(ctl, undefined, false, () => ['x'])[0]!.adapters).toBeUndefined();
  });

  it('explains an adapter that can be served with no problems', () => {
    const ctl = fleet([makeReplica({ id: 'r-1', endpoint: 'http://10.0.0.1:40001', spec: spec(['sql-lora', 'chat-lora']) })]);
    expect(explainView(ctl, model.name, 'chat-lora').adapter).toEqual({ name: 'chat-lora', problems: [] });
    expect(explainView(ctl, model.name).adapter).toBeUndefined();
  });

  it('says when no replica of its base is ready, and when none was started with it', () => {
    expect(explainView(fleet([]), model.name, 'sql-lora').adapter?.problems).toEqual([`no replica of its base ${model.name} is ready`]);
    const starting = fleet([makeReplica({ id: 'r-1', state: 'starting', spec: spec(['sql-lora']) })]);
    expect(explainView(starting, model.name, 'sql-lora').adapter?.problems).toEqual([`no replica of its base ${model.name} is ready (r-1 starting)`]);
    const older = fleet([makeReplica({ id: 'r-1', endpoint: 'http://10.0.0.1:40001', spec: spec(['sql-lora']) })]);
    expect(explainView(older, model.name, 'chat-lora').adapter?.problems).toEqual([
      `no ready replica of ${model.name} was started with it (a rollout adding it is not done)`,
    ]);
  });

  it("says when its file failed its checksum, from the agent's error on the shard", () => {
    const error = checksumMismatchText('https://files.invalid/sql.gguf', SHA, 'cd'.repeat(32));
    const ctl = fleet([
      makeReplica({
        id: 'r-2',
        state: 'failed',
        spec: spec(['sql-lora', 'chat-lora']),
        shards: [{ id: 'r-2-0', nodeId: 'node-2', rank: 0, gpuUuids: [], gpuIndices: [], state: 'failed', error }],
      }),
    ]);
    const problems = explainView(ctl, model.name, 'sql-lora').adapter?.problems;
    expect(problems).toEqual([`its file failed its checksum on replica r-2: ${error}`, `no replica of its base ${model.name} is ready (r-2 failed)`]);
    // The other adapter's file is not the one that failed.
    expect(explainView(ctl, model.name, 'chat-lora').adapter?.problems).toEqual([`no replica of its base ${model.name} is ready (r-2 failed)`]);
  });
});
