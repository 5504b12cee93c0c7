import { afterAll, describe, expect, it } from '@jest/globals';
import path from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { Controller, type CatalogView } from '../controller/controller.js';
import { Inventory } from '../inventory.js';
import { FaultyStore } from '../store/faulty.js';
import { SqliteStore } from '../store/sqlite.js';
import { makeModel, makeReport } from '../../test/factories.js';
import { tempDirs } from '../../test/temp-dirs.js';
import { fleetEvents } from './index.js';
import { EventLog, type EventLogOptions, type NewEvent } from './event-log.js';

const tmp = tempDirs('llmgw-events-', afterAll);
const log = pino({ level: 'silent' });

function makeEvent(overrides: Partial<NewEvent> = {}): NewEvent {
  return { type: 'Normal', source: 'admin', reason: 'cordon', object: 'node/n1', nodes: ['n1'], who: 'ops', message: 'cordoned by "ops"', ...overrides };
}

function eventLog(store: SqliteStore | FaultyStore, o: Partial<EventLogOptions> = {}): Promise<EventLog> {
  return EventLog.load(store, { log, ...o });
}

describe('EventLog', () => {
  it('keeps events in the store: a restart lists them, and new ids follow the old', async () => {
    const dir = tmp();
    const store = new SqliteStore(dir);
    const first = await eventLog(store);
    first.record(makeEvent());
    first.record(makeEvent({ reason: 'uncordon', message: 'uncordoned by "ops"' }));
    await first.flush();
    await store.close();
    const again = new SqliteStore(dir);
    const second = await eventLog(again);
    expect(second.list().events.map((e) => [e.id, e.reason, e.who])).toEqual([
      [1, 'cordon', 'ops'],
      [2, 'uncordon', 'ops'],
    ]);
    expect(second.record(makeEvent()).id).toBe(3);
    await again.close();
  });

  it('a corrupt row in the store is skipped at start: the other events stay, and new ids follow the newest', async () => {
    const dir = tmp();
    const store = new SqliteStore(dir);
    const first = await eventLog(store);
    for (const m of ['m1', 'm2', 'm3']) first.record(makeEvent({ message: m }));
    await first.flush();
    await store.close();
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.prepare('UPDATE events SET data = ? WHERE id = 2').run('{"id": 2, "torn');
    db.prepare('INSERT INTO events (id, time_ms, data) VALUES (?, ?, ?)').run(4, Date.now(), JSON.stringify({ id: 4, message: 'no nodes' }));
    db.close();
    const again = new SqliteStore(dir);
    const second = await eventLog(again);
    expect(second.list().events.map((e) => [e.id, e.message])).toEqual([
      [1, 'm1'],
      [3, 'm3'],
    ]);
    expect(second.list({ node: 'n1' }).events).toHaveLength(2);
    second.record(makeEvent({ message: 'after' }));
    await second.flush();
    expect((await again.loadEvents(10)).map((e) => e.message)).toEqual(['m1', 'm3', 'after']);
    await again.close();
  });

  it('keeps a bounded number for a bounded time, pruned on write in memory and in the store alike', async () => {
    let nowMs = Date.parse('2026-01-01T00:00:00Z');
    const store = new SqliteStore(tmp());
    const events = await eventLog(store, { maxRows: 3, retentionMs: 60_000, now: () => nowMs });
    for (let i = 0; i < 5; i++) events.record(makeEvent({ message: `m${i}` }));
    expect(events.list().events.map((e) => e.message)).toEqual(['m2', 'm3', 'm4']);
    await events.flush();
    expect((await store.loadEvents(100)).map((e) => e.message)).toEqual(['m2', 'm3', 'm4']);
    nowMs += 61_000;
    events.record(makeEvent({ message: 'late' }));
    expect(events.list().events.map((e) => e.message)).toEqual(['late']);
    await events.flush();
    expect((await store.loadEvents(100)).map((e) => e.message)).toEqual(['late']);
    await store.close();
  });

  it('filters by node and model, after a cursor, the newest `limit`', async () => {
    const store = new SqliteStore(tmp());
    const events = await eventLog(store);
    events.record(makeEvent({ nodes: ['n1'], model: 'a', message: '1' }));
    events.record(makeEvent({ nodes: ['n2'], model: 'b', message: '2' }));
    events.record(makeEvent({ nodes: ['n1', 'n2'], model: 'b', message: '3' }));
    expect(events.list({ node: 'n2' }).events.map((e) => e.message)).toEqual(['2', '3']);
    expect(events.list({ model: 'a' }).events.map((e) => e.message)).toEqual(['1']);
    expect(events.list({ since: 1 })).toEqual({ events: [expect.objectContaining({ id: 2 }), expect.objectContaining({ id: 3 })], cursor: 3 });
    expect(events.list({ limit: 1 }).events.map((e) => e.message)).toEqual(['3']);
    // A watch behind by more than `limit` gets every event, page by page, none skipped.
    const page = events.list({ since: 0, limit: 2 });
    expect([page.events.map((e) => e.id), page.cursor]).toEqual([[1, 2], 2]);
    expect(events.list({ since: page.cursor, limit: 2 })).toEqual({ events: [expect.objectContaining({ id: 3 })], cursor: 3 });
    // A cursor from a store that was replaced (past the newest id) starts over.
    expect(events.list({ since: 99 }).events).toHaveLength(3);
    await store.close();
  });

  it('a watch answers when a matching event is recorded, not for one of another node', async () => {
    const store = new SqliteStore(tmp());
    const events = await eventLog(store);
    const watch = events.wait({ node: 'n1', since: 0 }, 5_000);
    let answered = false;
    void watch.then(() => (answered = true));
    events.record(makeEvent({ nodes: ['n2'], object: 'node/n2' }));
    await new Promise((r) => setTimeout(r, 20));
    expect(answered).toBe(false);
    events.record(makeEvent({ nodes: ['n1'], message: 'mine' }));
    expect((await watch).events.map((e) => e.message)).toEqual(['mine']);
    expect((await events.wait({ node: 'n3', since: 2 }, 10)).events).toEqual([]);
    await store.close();
  });

  it('an event the store refuses stays in memory and is written with the next one', async () => {
    const sqlite = new SqliteStore(tmp());
    const faulty = new FaultyStore(sqlite);
    const events = await eventLog(faulty);
    faulty.fault = 'ENOSPC';
    expect(() => events.record(makeEvent({ message: 'while full' }))).not.toThrow();
    await events.flush();
    expect(events.list().events.map((e) => e.message)).toEqual(['while full']);
    faulty.fault = undefined;
    events.record(makeEvent({ message: 'after' }));
    await events.flush();
    expect((await sqlite.loadEvents(10)).map((e) => e.message)).toEqual(['while full', 'after']);
    await sqlite.close();
  });
});

describe('fleetEvents: the reconciler decisions of a pass', () => {
  it('records a placement with its code, reason, node and model, and an engine failure as a Warning', async () => {
    const store = new SqliteStore(tmp());
    const model = makeModel();
    const catalog: CatalogView = { models: [model], resolve: (n) => (n === model.name ? model : undefined), suggest: () => [] };
    const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
    const ctl = await Controller.load(await Inventory.load(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }), store, catalog, opts, log);
    const { events } = await fleetEvents(store, ctl, log);
    ctl.heartbeat({ report: makeReport({ node_id: 'node-1', memory_total_mb: 8192 }), shards: [] });
    ctl.reconcileNow();
    const [r] = ctl.listReplicas();
    expect(events.list().events).toEqual([
      expect.objectContaining({
        type: 'Normal',
        source: 'reconciler',
        reason: 'scale-up',
        object: `replica/${r!.id}`,
        nodes: ['node-1'],
        model: model.name,
        message: expect.stringMatching(/^placed on node-1 \(model qwen-coder-14b, profile cpu\): /),
      }),
    ]);
    ctl.heartbeat({
      report: makeReport({ node_id: 'node-1', memory_total_mb: 8192 }),
      shards: [{ id: `${r!.id}-0`, replica_id: r!.id, state: 'failed', error: 'exit 1: out of memory' }],
    });
    expect(events.list({ since: 1 }).events).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'engine-failed',
        object: `replica/${r!.id}`,
        message: 'failed: shard 0 on node-1: exit 1: out of memory',
      }),
    ]);
    ctl.stop();
    await store.close();
  });
});
