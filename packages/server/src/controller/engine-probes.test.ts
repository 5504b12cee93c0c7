import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';
import { Controller, type CatalogView } from './controller.js';
import { probeHealth } from './engine-probes.js';

/**
 * Issue 28: an engine is judged by what it does. A replica whose agent went silent keeps
 * its traffic while the server's probes of its engine answer; a failed probe or request
 * ejects it, with backoff; the node's loss (`--lost-after`) ends it.
 */

const servers: http.Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
});

/** A health endpoint that answers 200 to the engine key while `up`. */
async function engine(key: string) {
  const state = { up: true, probes: 0 };
  const server = http.createServer((req, res) => {
    state.probes++;
    res.statusCode = state.up && req.url === '/health' && req.headers.authorization === `Bearer ${key}` ? 200 : 503;
    res.end();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function controller(replica: Replica, clock: { now: number }) {
  const store = memoryStore({ replicas: [replica] });
  const model = makeModel();
  const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
  const opts = {
    reconcileIntervalMs: 60_000,
    drainParallel: 1,
    minHealthyMs: 0,
    drainTimeoutMs: 60_000,
    maxLostFraction: 0.5,
    failedBackoffMs: 30_000,
    engineProbeIntervalMs: 1000,
    engineKey: () => 'engine-key',
    now: () => clock.now,
  };
  const inventory = new Inventory(store, { notReadyAfterMs: 10_000, lostAfterMs: 60_000 }, clock.now);
  return new Controller(inventory, store, catalog, opts, pino({ level: 'silent' }), [replica]);
}

describe('engines judged by what they do', () => {
  it('keeps routing to an engine whose agent is silent while its probes answer; a failed probe or request ejects it; loss ends it', async () => {
    const e = await engine('engine-key');
    const clock = { now: 1_000_000 };
    const r = makeReplica({ endpoint: e.url, shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready', port: 1 }] });
    const ctl = controller(r, clock);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1', mgmt_addr: '127.0.0.1' }), shards: [] });
    const routed = () => ctl.routes(r.model).map((t) => t.replicaId);
    const tick = async (ms: number) => {
      clock.now += ms;
      await ctl.probes.round();
      ctl.events.emit('replicas');
    };
    expect(routed()).toEqual(['r-1']);
    // A reporting node's engines are not probed.
    await tick(4000);
    expect(e.state.probes).toBe(0);
    // Quiet past half of --not-ready-after: probed, and still routed once not-ready.
    await tick(2000);
    expect(e.state.probes).toBe(1);
    for (let i = 0; i < 6; i++) await tick(1000);
    expect(ctl.inventory.liveness(ctl.inventory.get('node-1')!, clock.now)).toBe('not-ready');
    expect(routed()).toEqual(['r-1']);
    expect(ctl.serving(ctl.listReplicas()[0]!)).toEqual({ serves: true, silentS: 12 });
    // The engine stops answering: out at the next probe, and probed with backoff after.
    e.state.up = false;
    await tick(1000);
    expect(routed()).toEqual([]);
    expect(ctl.serving(ctl.listReplicas()[0]!)).toEqual({ serves: false });
    const probes = e.state.probes;
    e.state.up = true;
    await tick(1000);
    expect(e.state.probes).toBe(probes);
    await tick(1000);
    expect(routed()).toEqual(['r-1']);
    // A failed gateway request ejects it at once.
    ctl.engineFailed('r-1');
    ctl.events.emit('replicas');
    expect(routed()).toEqual([]);
    for (let i = 0; i < 3; i++) await tick(1000);
    expect(routed()).toEqual(['r-1']);
    // Lost: no probe keeps it (the reconciler replaces it).
    clock.now += 60_000;
    await ctl.probes.round();
    ctl.events.emit('replicas');
    expect(routed()).toEqual([]);
  });

  it('probes GET /health with the engine key, and says no for anything but a 200 in time', async () => {
    const e = await engine('k');
    expect(await probeHealth({ replicaId: 'r', endpoint: e.url, apiKey: 'k' }, 1000)).toBe(true);
    expect(await probeHealth({ replicaId: 'r', endpoint: e.url, apiKey: 'wrong' }, 1000)).toBe(false);
    expect(await probeHealth({ replicaId: 'r', endpoint: 'http://127.0.0.1:1', apiKey: 'k' }, 1000)).toBe(false);
    const hang = http.createServer(() => {});
    servers.push(hang);
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    expect(await probeHealth({ replicaId: 'r', endpoint: `http://127.0.0.1:${(hang.address() as AddressInfo).port}`, apiKey: 'k' }, 100)).toBe(false);
    hang.closeAllConnections();
  });
});
