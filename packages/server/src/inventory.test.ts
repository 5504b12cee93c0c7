import { describe, expect, it } from '@jest/globals';
import { Inventory } from './inventory.js';
import { sameJson } from './report-values.js';
import { makeReport } from '../test/factories.js';
import type { NodeReportRow } from './store/store.js';
import { memoryStore } from './store/testing.js';

const report = makeReport({ node_id: 'n1' });

describe('Inventory.snapshot', () => {
  it('passes the CPU cores an agent reports, and leaves them out when it does not', async () => {
    const inv = new Inventory(memoryStore(), { notReadyAfterMs: 15_000, lostAfterMs: 60_000 });
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 32 }), 1000);
    inv.report(makeReport({ node_id: 'n2' }), 1000);
    expect(inv.snapshot(1000).map((n) => n.cpuCores)).toEqual([32, undefined]);
  });
});

describe('Inventory.setAdmin', () => {
  it('leaves the node as it was when its new admin state cannot be saved', async () => {
    const inv = new Inventory(
      memoryStore({
        saveNodeAdmin: () => Promise.reject(new Error('disk full')),
      }),
      { notReadyAfterMs: 15_000, lostAfterMs: 60_000 },
    );
    inv.report(report, 1000);
    await expect(inv.setAdmin('n1', 'draining', 'PSU swap', new Date(2000))).rejects.toThrow('disk full');
    // The operator got an error, so the reconciler must not start draining the node either.
    expect(inv.get('n1')!.admin.state).toBe('ready');
    expect(inv.snapshot(2000).at(0)?.admin).toBe('ready');
  });
});

describe('Inventory.setAdmin on a node already in that state', () => {
  const inv = () => {
    const i = new Inventory(memoryStore(), { notReadyAfterMs: 15_000, lostAfterMs: 60_000 });
    i.report(report, 1000);
    return i;
  };

  it('keeps the reason and the time it began unless a new reason is given', async () => {
    const i = inv();
    await i.setAdmin('n1', 'cordoned', 'PSU swap', new Date(2000));
    await i.setAdmin('n1', 'cordoned', undefined, new Date(3000));
    expect(i.get('n1')!.admin).toEqual({ state: 'cordoned', reason: 'PSU swap', changedAt: new Date(2000).toISOString() });
    await i.setAdmin('n1', 'cordoned', 'fan', new Date(4000));
    expect(i.get('n1')!.admin.reason).toBe('fan');
    // Another state starts afresh: an uncordoned node has no reason to be cordoned.
    await i.setAdmin('n1', 'ready', undefined, new Date(5000));
    expect(i.get('n1')!.admin).toEqual({ state: 'ready', changedAt: new Date(5000).toISOString() });
  });

  it("keeps a drain's deadline and force when the drain is asked for again without them", async () => {
    const i = inv();
    await i.setAdmin('n1', 'draining', 'move', new Date(2000), { deadlineS: 60, force: true });
    await i.setAdmin('n1', 'draining', undefined, new Date(3000));
    expect(i.get('n1')!.admin).toEqual({
      state: 'draining',
      reason: 'move',
      changedAt: new Date(2000).toISOString(),
      drainDeadline: new Date(62_000).toISOString(),
      force: true,
    });
  });
});

describe('Inventory on a shared store', () => {
  it('ages a node heard through the database only up to the last pull that worked, and one heard here by the clock', () => {
    const inv = new Inventory(memoryStore(), { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }, 0, [], { shared: true });
    inv.heardFromDatabase(1000);
    inv.applyRemote({ id: 'far', admin: { state: 'ready' }, report: makeReport({ node_id: 'far' }), shards: [] }, 1000);
    inv.report(makeReport({ node_id: 'near' }), 1000);
    // The database is down for a minute: no pull works, 'far' stays as it was last heard.
    expect([inv.liveness(inv.get('far')!, 61_000), inv.liveness(inv.get('near')!, 61_000)]).toEqual(['ready', 'lost']);
    // Pulls work again and bring no newer heartbeat of 'far': it ages like any other.
    inv.heardFromDatabase(61_000);
    expect(inv.liveness(inv.get('far')!, 61_000)).toBe('lost');
    inv.stop();
  });
});

describe('Inventory: report writes', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('writes the changed reports of a batch in one call, a repeat not at all (SQLite)', async () => {
    const writes: string[][] = [];
    const inv = new Inventory(
      memoryStore({ saveNodeReports: async (rows) => void writes.push(rows.map((r) => `${r.id}:${r.report.cpu_cores}`)) }),
      { notReadyAfterMs: 15_000, lostAfterMs: 60_000 },
      0,
      [],
      { batchMs: 30 },
    );
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 8 }), 1000);
    inv.report(makeReport({ node_id: 'n2', cpu_cores: 8 }), 1000);
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 16 }), 1100);
    expect(writes).toEqual([]);
    await sleep(80);
    expect(writes).toEqual([['n1:16', 'n2:8']]);
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 16 }), 1200);
    await sleep(80);
    expect(writes).toHaveLength(1);
    inv.stop();
  });
});

describe('Inventory.applyRemote: its own earlier write coming back (issue 32)', () => {
  // Heartbeats without seq (an older agent) on a shared store: a pull brings back this
  // instance's own row, stamped with the database's time of the write, after the beat in it.
  const row = (cores: number, lastSeenMs: number) => ({
    id: 'n1',
    admin: { state: 'ready' as const },
    report: makeReport({ node_id: 'n1', cpu_cores: cores }),
    shards: [],
    lastSeenMs,
  });
  const shared = (saveNodeReports: (rows: readonly NodeReportRow[]) => Promise<number | void>) =>
    new Inventory(memoryStore({ saveNodeReports }), { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }, 0, [], { shared: true, batchMs: 60_000 });

  it('keeps a report heard since its last write, and writes that one, not the earlier one', async () => {
    const writes: number[] = [];
    let dbMs = 1050;
    const inv = shared(async (rows) => {
      writes.push(...rows.map((r) => r.report.cpu_cores!));
      return dbMs;
    });
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 1 }), 1000);
    await inv.persistReports();
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 2 }), 1100);
    // Its write of cores 1 at 1050 on the database's clock, which runs 100 ms ahead of this one.
    inv.applyRemote(row(1, 1050), 1150);
    expect(inv.get('n1')!.report!.cpu_cores).toBe(2);
    dbMs = 1250;
    await inv.persistReports();
    expect(writes).toEqual([1, 2]);
    // A row written after (another instance heard the node) is taken.
    inv.applyRemote(row(3, 1300), 1400);
    expect(inv.get('n1')!.report!.cpu_cores).toBe(3);
    inv.stop();
  });

  it('keeps the report a batch in flight is writing, so that a retry writes it again', async () => {
    const writes: number[] = [];
    let fail!: (err: Error) => void;
    let calls = 0;
    const inv = shared(async (rows) => {
      writes.push(...rows.map((r) => r.report.cpu_cores!));
      if (++calls === 2) await new Promise<void>((_, reject) => (fail = reject));
      return 1050;
    });
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 1 }), 1000);
    await inv.persistReports();
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 2 }), 1100);
    const second = inv.persistReports();
    inv.applyRemote(row(1, 1050), 1150);
    // The batch in flight committed (its row is pulled) but its answer is not back yet.
    inv.applyRemote(row(2, 1120), 1220);
    expect(inv.get('n1')!.remote).toBe(false);
    fail(new Error('connection lost'));
    expect(await second).toBe(false);
    await inv.persistReports();
    expect(writes).toEqual([1, 2, 2]);
    expect(inv.get('n1')!.report!.cpu_cores).toBe(2);
    inv.stop();
  });
});

describe('Inventory.remove', () => {
  it('lets a batch of reports in flight land before the delete, so the deleted row is not written back (review of issue 27)', async () => {
    const order: string[] = [];
    let release!: () => void;
    const inv = new Inventory(
      memoryStore({
        saveNodeReports: async (rows) => {
          order.push(`save ${rows.map((r) => r.id).join(',')} started`);
          await new Promise<void>((r) => (release = r));
          order.push('save done');
        },
        deleteNode: async (id) => void order.push(`delete ${id}`),
      }),
      { notReadyAfterMs: 15_000, lostAfterMs: 60_000 },
    );
    inv.report(makeReport({ node_id: 'n1' }), 1000);
    const saving = inv.persistReports();
    expect(order).toEqual(['save n1 started']);
    const removing = inv.remove('n1');
    await Promise.resolve();
    expect(order).toEqual(['save n1 started']);
    release();
    await Promise.all([saving, removing]);
    expect(order).toEqual(['save n1 started', 'save done', 'delete n1']);
    expect(inv.get('n1')).toBeUndefined();
  });
});

describe('sameJson', () => {
  it('compares JSON values as JSON.stringify would, whatever the order of keys', () => {
    expect(sameJson(makeReport({ node_id: 'n1' }), makeReport({ node_id: 'n1' }))).toBe(true);
    expect(sameJson({ a: 1, b: [1, { c: 'x' }] }, { b: [1, { c: 'x' }], a: 1 })).toBe(true);
    expect(sameJson({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(sameJson({ a: 1 }, { a: 1, b: null })).toBe(false);
    expect(sameJson({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(sameJson({ a: [] }, { a: {} })).toBe(false);
    expect(sameJson({ a: 1 }, { a: '1' })).toBe(false);
    expect(sameJson(null, {})).toBe(false);
    expect(sameJson(undefined, makeReport({ node_id: 'n1' }))).toBe(false);
    const gpu = (used: number) => ({ index: 0, uuid: 'GPU-0', name: 'H100', class: 'H100-80GB', memory_total_mb: 81920, memory_used_mb: used, problems: [] });
    expect(sameJson(makeReport({ gpus: [gpu(0), gpu(0)] }), makeReport({ gpus: [gpu(0), gpu(0)] }))).toBe(true);
    expect(sameJson(makeReport({ gpus: [gpu(0), gpu(0)] }), makeReport({ gpus: [gpu(0), gpu(1)] }))).toBe(false);
  });
});
