import { afterAll, describe, expect, it } from '@jest/globals';
import { makeReplica, makeReport } from '../../test/factories.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { tempDirs } from '../../test/temp-dirs.js';
import { PostgresStore } from './postgres.js';
import { SqliteStore } from './sqlite.js';
import { MAX_USAGE_COUNT, minuteOf, type Store, type StoredEvent, type StoredKey, type StoredToken } from './store.js';

/**
 * The store's contract, the same cases on every engine: what a server sees must not
 * depend on where its state lives. Where the engines differ by design (PostgreSQL
 * assigns event ids and stamps liveness with its own clock) a case says so by `kind`.
 */

/** A store to test, and how to open the same state again (a restart). */
interface Opened {
  store: Store;
  reopen: () => Promise<Store>;
  done: () => Promise<void>;
}

const tmp = tempDirs('llmgw-contract-', afterAll);

const ENGINES: [string, () => Promise<Opened>][] = [
  [
    'sqlite',
    () => {
      const dir = tmp();
      const opened: Store[] = [new SqliteStore(dir)];
      return Promise.resolve({
        store: opened[0]!,
        reopen: () => Promise.resolve(opened[opened.push(new SqliteStore(dir)) - 1]!),
        done: async () => void (await Promise.all(opened.map((s) => s.close().catch(() => {})))),
      });
    },
  ],
  [
    'postgres',
    async () => {
      const db = await freshDatabase();
      const opened = [await PostgresStore.open(db.url)];
      return {
        store: opened[0]!,
        reopen: async () => opened[opened.push(await PostgresStore.open(db.url)) - 1]!,
        done: async () => {
          await Promise.all(opened.map((s) => s.close().catch(() => {})));
          await db.drop();
        },
      };
    },
  ],
];

const key: StoredKey = { id: 'key-1', name: 'ci', hash: 'ab', prefix: 'sk-llmgw-abc', models: ['m'], rpm: 5, createdAt: '2026-01-01T00:00:00.000Z' };
const token: StoredToken = { id: 'tok-1', name: 'ops', role: 'viewer', hash: 'cd', prefix: 'llmgw-tok-1', createdAt: '2026-01-01T00:00:00.000Z' };
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

function event(i: number, overrides: Partial<StoredEvent> = {}): StoredEvent {
  return {
    id: i,
    time: new Date(T0 + i * 1000).toISOString(),
    type: 'Normal',
    source: 'admin',
    reason: 'cordon',
    object: `node/n${i}`,
    nodes: [`n${i}`],
    who: 'ops',
    message: `m${i}`,
    ...overrides,
  };
}

/** Runs `fn` on a new store of the engine, closing (and for PostgreSQL dropping) it after. */
function withStore(open: () => Promise<Opened>, fn: (o: Opened) => Promise<void>): () => Promise<void> {
  return async () => {
    const o = await open();
    try {
      await fn(o);
    } finally {
      await o.done();
    }
  };
}

const describeEach = (name: string, body: (open: () => Promise<Opened>, kind: string) => void) => {
  for (const [kind, open] of ENGINES) (kind === 'postgres' ? describePostgres : describe)(`${name} (${kind})`, () => body(open, kind));
};

describeEach('the store contract', (open, kind) => {
  it(
    'keeps keys, usage and node admin state across a reopen',
    withStore(open, async ({ store, reopen }) => {
      await store.saveKey(key);
      await store.addUsage([{ keyId: 'key-1', model: 'm', requests: 2, errors: 1, cancelled: 1, promptTokens: 10, completionTokens: 3 }]);
      await store.addUsage([{ keyId: 'key-1', model: 'm', requests: 1, errors: 0, cancelled: 1, promptTokens: 5, completionTokens: 1 }]);
      await store.saveNodeAdmin('n1', { state: 'draining', reason: 'swap', drainDeadline: '2026-01-02T00:00:00.000Z' });
      await store.close();
      const b = await reopen();
      expect(await b.loadKeys()).toEqual([key]);
      expect(await b.loadUsage()).toEqual([
        { keyId: 'key-1', keyName: 'ci', model: 'm', requests: 3, errors: 1, cancelled: 2, promptTokens: 15, completionTokens: 4 },
      ]);
      expect(await b.loadNodes()).toEqual([{ id: 'n1', admin: { state: 'draining', reason: 'swap', drainDeadline: '2026-01-02T00:00:00.000Z' } }]);
    }),
  );

  it(
    'keeps rollout records across a reopen: history and control written apart never undo each other',
    withStore(open, async ({ store, reopen }) => {
      const entry = { revision: 'abc123abc123', sinceMs: T0, change: 'first revision', content: { source: 's' } };
      await store.saveRolloutHistory('m', { history: [entry] });
      await store.saveRolloutControl('m', { paused: true });
      await store.saveRolloutHistory('m', { history: [entry], halted: { revision: 'abc123abc123', reason: 'r-1 failed', atMs: T0 + 1 } });
      await store.saveRolloutControl('only-control', { resumed: { revision: 'def', atMs: T0 } });
      await store.close();
      const b = await reopen();
      expect(await b.loadRollouts()).toEqual([
        { model: 'm', history: [entry], halted: { revision: 'abc123abc123', reason: 'r-1 failed', atMs: T0 + 1 }, paused: true },
        { model: 'only-control', history: [], resumed: { revision: 'def', atMs: T0 } },
      ]);
    }),
  );

  it(
    'a saved key is updated in place: revocation and limits change, hash, prefix and creation do not',
    withStore(open, async ({ store }) => {
      await store.saveKey(key);
      await store.saveKey({
        ...key,
        hash: 'other',
        prefix: 'other',
        createdAt: '2030-01-01T00:00:00.000Z',
        name: 'ci2',
        models: ['a', 'b'],
        rpm: undefined,
        maxConcurrent: 2,
        tpm: 50_000,
        priority: 'batch',
        revokedAt: '2026-02-01T00:00:00.000Z',
      });
      await store.saveKey({ ...key, id: 'key-0', hash: 'h0', createdAt: '2026-01-01T00:00:00.000Z' });
      await store.saveKey({ ...key, id: 'key-2', hash: 'h2', createdAt: '2025-12-31T00:00:00.000Z' });
      expect((await store.loadKeys()).map((k) => k.id)).toEqual(['key-2', 'key-0', 'key-1']);
      expect((await store.loadKeys())[2]).toEqual({
        ...key,
        name: 'ci2',
        models: ['a', 'b'],
        rpm: undefined,
        maxConcurrent: 2,
        tpm: 50_000,
        priority: 'batch',
        revokedAt: '2026-02-01T00:00:00.000Z',
      });
    }),
  );

  it(
    'usage from several deltas of one batch adds up, and a key no longer stored is listed under its id',
    withStore(open, async ({ store }) => {
      const d = { keyId: 'gone', model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: 2, completionTokens: 3 };
      await store.addUsage([d, d, { ...d, model: 'a' }]);
      await store.addUsage([]);
      expect(await store.loadUsage()).toEqual([
        { ...d, keyName: 'gone', model: 'a' },
        { ...d, keyName: 'gone', requests: 2, promptTokens: 4, completionTokens: 6 },
      ]);
    }),
  );

  it(
    'usage per minute: a window sums the minutes from the one its start is in, the totals all; minutes past 31 days are pruned',
    withStore(open, async ({ store }) => {
      await store.saveKey(key);
      const d = { keyId: key.id, model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: 10, completionTokens: 5 };
      const min = 60_000;
      const t = 1_000 * 24 * 3600_000; // a whole minute
      await store.addUsage([
        { ...d, minuteMs: t - 40 * 24 * 3600_000 },
        { ...d, minuteMs: t - 10 * min },
        { ...d, minuteMs: t - 2 * min, errors: 1 },
        { ...d, minuteMs: t - 2 * min, model: 'a' },
      ]);
      await store.addUsage([{ ...d, minuteMs: t, promptTokens: 100 }, { ...d }]);
      const row = (model: string, n: number, p: number, c: number, errors = 0) => ({
        keyId: key.id,
        keyName: key.name,
        model,
        requests: n,
        errors,
        cancelled: 0,
        promptTokens: p,
        completionTokens: c,
      });
      // From inside the minute two before t: that minute whole, and t's.
      expect(await store.loadUsage(t - 2 * min + 59_999)).toEqual([row('a', 1, 10, 5), row('m', 2, 110, 10, 1)]);
      expect(await store.loadUsage(t - 10 * min)).toEqual([row('a', 1, 10, 5), row('m', 3, 120, 15, 1)]);
      // The minute 40 days back was pruned when t was written; the totals keep it (and the delta without a minute).
      expect(await store.loadUsage(0)).toEqual([row('a', 1, 10, 5), row('m', 3, 120, 15, 1)]);
      expect(await store.loadUsage()).toEqual([row('a', 1, 10, 5), row('m', 5, 140, 25, 1)]);
    }),
  );

  it(
    'usage sums saturate at MAX_USAGE_COUNT instead of overflowing (2^53 − 1 per flush, many flushes)',
    withStore(open, async ({ store }) => {
      const huge = { keyId: 'k', model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: MAX_USAGE_COUNT, completionTokens: MAX_USAGE_COUNT };
      // 2^63 / (2^53 − 1) ≈ 1,025 such rows overflowed PostgreSQL's bigint; saturating, any number is fine.
      for (let i = 0; i < 3; i++) expect(await store.addUsage([huge, { ...huge, keyId: 'other' }])).toEqual([]);
      const rows = await store.loadUsage();
      expect(rows.map((r) => [r.keyId, r.requests, r.promptTokens, r.completionTokens])).toEqual([
        ['k', 3, MAX_USAGE_COUNT, MAX_USAGE_COUNT],
        ['other', 3, MAX_USAGE_COUNT, MAX_USAGE_COUNT],
      ]);
      // A window over 1,100 saturated minutes: SQLite's sum() overflowed (and threw) past ~1,025, PostgreSQL's numeric did not; both saturate.
      const now = minuteOf(Date.now());
      expect(await store.addUsage(Array.from({ length: 1100 }, (_, i) => ({ ...huge, minuteMs: now - i * 60_000 })))).toEqual([]);
      const window = await store.loadUsage(now - 2000 * 60_000);
      expect(window.map((r) => [r.keyId, r.requests, r.promptTokens, r.completionTokens])).toEqual([['k', 1100, MAX_USAGE_COUNT, MAX_USAGE_COUNT]]);
    }),
  );

  if (kind === 'postgres')
    it(
      'a usage row the database refuses for its values is skipped and returned; the other rows are written',
      withStore(open, async ({ store }) => {
        const good = { keyId: 'a', model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: 2, completionTokens: 3 };
        // Not an integer: bigint refuses it (22P02), as it refused an overflowing sum.
        const bad = { ...good, keyId: 'b', promptTokens: 1.5 };
        expect(await store.addUsage([good, bad, { ...good, keyId: 'c' }])).toEqual([bad]);
        expect((await store.loadUsage()).map((r) => r.keyId)).toEqual(['a', 'c']);
      }),
    );

  it(
    'tokens are saved, renamed and revoked, never re-hashed',
    withStore(open, async ({ store }) => {
      await store.saveToken(token);
      await store.saveToken({ ...token, name: 'ops2', hash: 'x', role: 'admin', revokedAt: '2026-03-01T00:00:00.000Z' });
      expect(await store.loadTokens()).toEqual([{ ...token, name: 'ops2', revokedAt: '2026-03-01T00:00:00.000Z' }]);
    }),
  );

  it(
    'revocation is one-way: a save from a copy taken before the revoke (a racing update, another instance) keeps it revoked',
    withStore(open, async ({ store }) => {
      const at = '2026-02-01T00:00:00.000Z';
      await store.saveKey({ ...key, revokedAt: at });
      await store.saveKey({ ...key, rpm: 5 });
      expect(await store.loadKeys()).toEqual([{ ...key, rpm: 5, revokedAt: at }]);
      await store.saveToken({ ...token, revokedAt: at });
      await store.saveToken({ ...token, name: 'renamed' });
      expect(await store.loadTokens()).toEqual([{ ...token, name: 'renamed', revokedAt: at }]);
    }),
  );

  it(
    'the same join again (its join hash) replaces the credential it issued, in one statement; any other join of the id does not (issue 28)',
    withStore(open, async ({ store }) => {
      const at = '2026-01-01T00:00:00.000Z';
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h1', createdAt: at, joinHash: 'j1' })).toBe(true);
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h-other', createdAt: at, joinHash: 'j2' })).toBe(false);
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h-none', createdAt: at })).toBe(false);
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h1b', createdAt: '2026-01-02T00:00:00.000Z', joinHash: 'j1' })).toBe(true);
      // One row per node: the retried join's credential, the lost one gone.
      expect(await store.loadCredentials()).toEqual([{ nodeId: 'n1', hash: 'h1b', createdAt: '2026-01-02T00:00:00.000Z', joinHash: 'j1' }]);
      // A credential issued without a join id is never replaced.
      expect(await store.addCredential({ nodeId: 'n2', hash: 'h2', createdAt: at })).toBe(true);
      expect(await store.addCredential({ nodeId: 'n2', hash: 'h2b', createdAt: at })).toBe(false);
    }),
  );

  it(
    'a credential is added once per node, never replaced, and deleting a node removes its credential and no other',
    withStore(open, async ({ store }) => {
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h1', createdAt: '2026-01-01T00:00:00.000Z' })).toBe(true);
      expect(await store.addCredential({ nodeId: 'n1', hash: 'h1b', createdAt: '2026-01-02T00:00:00.000Z' })).toBe(false);
      expect(await store.addCredential({ nodeId: 'n2', hash: 'h2', createdAt: '2026-01-01T00:00:00.000Z' })).toBe(true);
      await store.saveNodeAdmin('n1', { state: 'cordoned' });
      await store.saveNodeAdmin('n2', { state: 'ready' });
      expect(await store.loadCredentials()).toEqual([
        { nodeId: 'n1', hash: 'h1', createdAt: '2026-01-01T00:00:00.000Z' },
        { nodeId: 'n2', hash: 'h2', createdAt: '2026-01-01T00:00:00.000Z' },
      ]);
      await store.deleteNode('n1');
      expect((await store.loadNodes()).map((n) => n.id)).toEqual(['n2']);
      expect((await store.loadCredentials()).map((c) => c.nodeId)).toEqual(['n2']);
    }),
  );

  it(
    'replicas are saved without their engine key, updated and removed, in one write',
    withStore(open, async ({ store, reopen }) => {
      await store.writeReplicas([makeReplica({ id: 'r-2', apiKey: 'secret' }), makeReplica({ id: 'r-1' }), makeReplica({ id: 'r-3' })], []);
      await store.writeReplicas([makeReplica({ id: 'r-1', state: 'draining', drainReason: 'swap' })], ['r-3']);
      await store.writeReplicas([], []);
      const { apiKey: _k1, ...r1 } = makeReplica({ id: 'r-1', state: 'draining', drainReason: 'swap' });
      const { apiKey: _k2, ...r2 } = makeReplica({ id: 'r-2' });
      expect(await store.loadReplicas()).toEqual([r1, r2]);
      expect(await (await reopen()).loadReplicas()).toEqual([r1, r2]);
    }),
  );

  it(
    'node reports create a ready node, replace the last report, and never touch the admin state',
    withStore(open, async ({ store }) => {
      const before = Date.now();
      await store.saveNodeReports([{ id: 'n1', report: makeReport({ node_id: 'n1' }), lastSeenMs: 1000 }]);
      await store.saveNodeAdmin('n2', { state: 'cordoned', reason: 'disk' });
      await store.saveNodeReports([
        { id: 'n2', report: makeReport({ node_id: 'n2' }), lastSeenMs: 2000 },
        { id: 'n1', report: makeReport({ node_id: 'n1', hostname: 'old' }), lastSeenMs: 3000 },
        { id: 'n1', report: makeReport({ node_id: 'n1', hostname: 'new' }), lastSeenMs: 4000 },
      ]);
      await store.saveNodeReports([]);
      const nodes = await store.loadNodes();
      expect(nodes.map((n) => [n.id, n.admin, n.report?.hostname])).toEqual([
        ['n1', { state: 'ready' }, 'new'],
        ['n2', { state: 'cordoned', reason: 'disk' }, 'n2'],
      ]);
      // SQLite keeps the time the instance saw; PostgreSQL its own clock at the write.
      if (kind === 'sqlite') expect(nodes.map((n) => n.lastSeenMs)).toEqual([4000, 2000]);
      else for (const n of nodes) expect(n.lastSeenMs).toBeGreaterThanOrEqual(before - 60_000);
    }),
  );

  it(
    'events are stored with increasing ids, listed newest last, and pruned by count and age in the same write',
    withStore(open, async ({ store, reopen }) => {
      const keep = { sinceMs: 0, maxRows: 3 };
      const first = await store.addEvents([event(1), event(2)], keep);
      expect(first.map((e) => e.message)).toEqual(['m1', 'm2']);
      expect(first[1]!.id).toBeGreaterThan(first[0]!.id);
      const more = await store.addEvents([event(3), event(4)], keep);
      expect(more[0]!.id).toBeGreaterThan(first[1]!.id);
      expect(await store.loadEvents(100)).toEqual([...first.slice(1), ...more]);
      expect(await store.loadEvents(2)).toEqual(more);
      expect(await store.loadEvents(100, first[1]!.id)).toEqual(more);
      expect(await store.loadEvents(1, first[1]!.id)).toEqual([more[1]]);
      expect(await store.loadEvents(100, more[1]!.id)).toEqual([]);
      // Older than `sinceMs` goes even while under the row count.
      const late = await store.addEvents([event(9)], { sinceMs: T0 + 4000, maxRows: 10 });
      expect((await store.loadEvents(100)).map((e) => e.message)).toEqual(['m4', 'm9']);
      // Ids keep increasing across a restart, so a watcher's cursor stays valid.
      const after = await (await reopen()).addEvents([event(10)], { sinceMs: 0, maxRows: 10 });
      expect(after[0]!.id).toBeGreaterThan(late[0]!.id);
    }),
  );

  it(
    'probe writes nothing a load would see',
    withStore(open, async ({ store }) => {
      await store.saveKey(key);
      await store.probe();
      expect(await store.loadKeys()).toEqual([key]);
    }),
  );
});
