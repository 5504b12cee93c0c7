import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Controller, type CatalogView } from '../controller/controller.js';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import { modelViews, nodeViews, replicaViews } from './views.js';

/** A controller over one ready replica on node-1, on a clock the test moves. */
function fleet(replicas: Replica[], model = makeModel()) {
  let nowMs = 1_000_000;
  const engineUp = { up: false };
  const store = memoryStore({ replicas });
  const catalog: CatalogView = { models: [model], resolve: () => model, suggest: () => [] };
  const opts = {
    reconcileIntervalMs: 60_000,
    drainParallel: 1,
    minHealthyMs: 0,
    drainTimeoutMs: 60_000,
    maxLostFraction: 1,
    failedBackoffMs: 30_000,
    now: () => nowMs,
    // The engine answers the server's probes while `engineUp` (issue 28).
    probeEngine: () => Promise.resolve(engineUp.up),
  };
  const ctl = new Controller(
    new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 600_000 }),
    store,
    catalog,
    opts,
    pino({ level: 'silent' }),
    replicas,
  );
  return { ctl, engineUp, advance: (ms: number) => (nowMs += ms) };
}

describe('views: honest shapes', () => {
  it('shows a replica whose node stopped reporting as unknown, not ready, and says why', () => {
    const { ctl, advance } = fleet([makeReplica({ id: 'r-1', endpoint: 'http://10.0.0.1:40001' })]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    expect(replicaViews(ctl)[0]).toMatchObject({ state: 'ready', shards: [{ state: 'ready' }] });
    expect(replicaViews(ctl)[0]!.error).toBeUndefined();
    expect(modelViews(ctl)[0]!.ready_replicas).toBe(1);
    advance(20_000);
    expect(replicaViews(ctl)[0]).toMatchObject({
      state: 'unknown',
      error: 'node node-1 stopped reporting: whether its engine still runs is unknown (ctl nodes)',
      shards: [{ node: 'node-1', state: 'unknown' }],
    });
    // ctl models counts it as ctl replicas shows it (issue 30): not ready.
    expect(modelViews(ctl)[0]!.ready_replicas).toBe(0);
  });

  it('shows a replica whose agent is silent but whose engine answers the probes as ready: serving, agent silent 42s', async () => {
    const { ctl, engineUp, advance } = fleet([makeReplica({ id: 'r-1', endpoint: 'http://10.0.0.1:40001' })]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'ready', port: 40001 }] });
    engineUp.up = true;
    advance(8_000);
    await ctl.probes.round();
    advance(34_000);
    await ctl.probes.round();
    expect(replicaViews(ctl)[0]).toMatchObject({ state: 'ready', note: 'serving, agent silent 42s', shards: [{ state: 'ready' }] });
    expect(replicaViews(ctl)[0]!.error).toBeUndefined();
  });

  it('says when a node was last seen as a number of seconds', () => {
    const { ctl, advance } = fleet([]);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [] });
    advance(42_400);
    const [v] = nodeViews(ctl);
    expect(v!.last_seen_s).toBe(42);
    expect(Object.keys(v!)).not.toContain('last_seen_ago');
  });

  it('masks the credentials of a source URL for admins and shows viewers only its host; a reported error carries none (issue 27)', () => {
    const source = 'https://bob:hunter2@files.example/private/m.gguf?X-Amz-Signature=abc123';
    const { ctl } = fleet([makeReplica({ id: 'r-1' })], makeModel({ source, sha256: 'a'.repeat(64) }));
    expect(modelViews(ctl, true)[0]!.source).toBe('https://***:***@files.example/private/m.gguf?X-Amz-Signature=***');
    expect(modelViews(ctl)[0]!.source).toBe('https://files.example/…');
    ctl.heartbeat({
      report: makeReport({ node_id: 'node-1' }),
      shards: [{ id: 'r-1-0', replica_id: 'r-1', state: 'failed', error: `cannot fetch ${source}: 403` }],
    });
    const shown = JSON.stringify(replicaViews(ctl));
    expect(shown).toContain('cannot fetch https://***:***@files.example/private/m.gguf?X-Amz-Signature=***: 403');
    expect(shown).not.toMatch(/hunter2|abc123/);
  });
});
