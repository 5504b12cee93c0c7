import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { pino } from 'pino';
import { makeReplica, makeReport } from '../../test/factories.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { tempDirs } from '../../test/temp-dirs.js';
import { tokenFor } from '../store/modes.js';
import { shareSecrets } from './secrets.js';
import { adminTls } from '../tls/index.js';
import { prepareJoinToken } from '../credentials/join-token.js';
import { BAD_STORES } from '../store/bad-files.js';
import { PostgresStore } from '../store/postgres.js';
import { SCHEMA_VERSION } from '../store/schema.js';
import { SqliteStore } from '../store/sqlite.js';
import type { StoredEvent } from '../store/store.js';

/** The built server, run as an operator runs it (`pnpm test` builds first). */
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const tmp = tempDirs('llmgw-migrate-', afterAll);
const log = pino({ level: 'silent' });
const KEEP = { sinceMs: 0, maxRows: 10_000 };
/** A minute an hour ago: inside the 31 days of per-minute usage a store keeps. */
const SINCE = Math.floor((Date.now() - 3600_000) / 60_000) * 60_000;

function migrate(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env };
    delete env.LLMGW_DATABASE_URL;
    const child = execFile(process.execPath, [MAIN, 'migrate', ...args], { env, timeout: 30_000 }, (_err, stdout, stderr) =>
      resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

const event = (id: number, reason: string, object: string): StoredEvent => ({
  id,
  time: new Date(Date.UTC(2026, 0, 1, 0, 0, id)).toISOString(),
  type: 'Normal',
  source: 'admin',
  reason,
  object,
  nodes: object.startsWith('node/') ? [object.slice(5)] : [],
  message: `${reason} ${object}`,
});

/** A SQLite install as a single server leaves it: a fleet in its store, its secrets in the data directory. */
async function sqliteInstall(dir: string) {
  const s = new SqliteStore(dir);
  await s.saveNodeAdmin('gpu-1', { state: 'cordoned', reason: 'fan', changedAt: '2026-01-01T00:00:00.000Z' });
  await s.saveNodeAdmin('gpu-2', { state: 'draining', changedAt: '2026-01-01T00:00:01.000Z', drainDeadline: '2026-01-01T01:00:00.000Z', force: true });
  await s.saveNodeReports([
    { id: 'gpu-1', report: makeReport({ node_id: 'gpu-1', labels: { zone: 'a' } }), lastSeenMs: 1_700_000_000_000 },
    { id: 'gpu-3', report: makeReport({ node_id: 'gpu-3' }), lastSeenMs: 1_700_000_001_000 },
  ]);
  await s.addCredential({ nodeId: 'gpu-1', hash: 'a'.repeat(64), createdAt: '2026-01-01T00:00:00.000Z' });
  await s.addCredential({ nodeId: 'gpu-3', hash: 'b'.repeat(64), createdAt: '2026-01-01T00:00:02.000Z', joinHash: 'f'.repeat(64) });
  await s.writeReplicas(
    [
      makeReplica({ id: 'r-1a2b3c4d', shards: [{ id: 'r-1a2b3c4d-0', nodeId: 'gpu-1', rank: 0, gpuUuids: ['GPU-1'], gpuIndices: [0], state: 'ready' }] }),
      makeReplica({ id: 'r-5e6f7a8b', model: 'llama', state: 'starting' }),
    ],
    [],
  );
  await s.saveKey({
    id: 'key-1',
    name: 'ci',
    hash: 'c'.repeat(64),
    prefix: 'sk-ci',
    models: ['qwen-coder-14b'],
    rpm: 60,
    maxConcurrent: 2,
    tpm: 60_000,
    priority: 'interactive',
    createdAt: '2026-01-01T00:00:00.000Z',
  });
  await s.saveKey({
    id: 'key-2',
    name: 'old',
    hash: 'd'.repeat(64),
    prefix: 'sk-old',
    models: [],
    expiresAt: '2027-01-01T00:00:00.000Z',
    createdAt: '2026-01-02T00:00:00.000Z',
    revokedAt: '2026-01-03T00:00:00.000Z',
  });
  await s.addUsage([
    { keyId: 'key-1', model: 'qwen-coder-14b', requests: 10, errors: 1, cancelled: 2, promptTokens: 1000, completionTokens: 500 },
    { keyId: 'key-2', model: 'llama', requests: 3, errors: 0, cancelled: 0, promptTokens: 30, completionTokens: 9 },
  ]);
  // Per minute as well (review of issue 28): `ctl usage --since` and TPM windows read these.
  await s.addUsage([
    { keyId: 'key-1', model: 'qwen-coder-14b', requests: 4, errors: 0, cancelled: 0, promptTokens: 400, completionTokens: 40, minuteMs: SINCE + 60_000 },
    { keyId: 'key-1', model: 'qwen-coder-14b', requests: 1, errors: 0, cancelled: 0, promptTokens: 10, completionTokens: 1, minuteMs: SINCE + 120_000 },
  ]);
  await s.saveToken({ id: 'tok-1', name: 'viewer', role: 'viewer', hash: 'e'.repeat(64), prefix: 'llmgw-v', createdAt: '2026-01-01T00:00:00.000Z' });
  await s.addEvents([event(1, 'cordon', 'node/gpu-1'), event(2, 'drain', 'node/gpu-2'), event(3, 'key-create', 'key/key-1')], KEEP);
  const rows = {
    nodes: await s.loadNodes(),
    credentials: await s.loadCredentials(),
    replicas: await s.loadReplicas(),
    keys: await s.loadKeys(),
    usage: await s.loadUsage(),
    usageSince: await s.loadUsage(SINCE),
    tokens: await s.loadTokens(),
    events: await s.loadEvents(100),
  };
  await s.close();
  // Its secrets, as a start of the single server writes them.
  const admin = tokenFor(undefined, dir, 'admin-token').token;
  const engine = tokenFor(undefined, dir, 'engine-key-secret').token;
  const tls = await adminTls({ dataDir: dir, listenHost: '127.0.0.1', extraSans: [] }, log);
  const join = prepareJoinToken(undefined, dir, tls.caPem).secret;
  return { rows, admin, engine, join, caPem: tls.caPem, caKey: fs.readFileSync(path.join(dir, 'tls', 'ca-key.pem'), 'utf8') };
}

async function loadAll(store: PostgresStore) {
  const nodes = (await store.loadNodes()).map(({ shards: _none, ...n }) => n);
  return {
    nodes,
    credentials: await store.loadCredentials(),
    replicas: await store.loadReplicas(),
    keys: await store.loadKeys(),
    usage: await store.loadUsage(),
    usageSince: await store.loadUsage(SINCE),
    tokens: await store.loadTokens(),
    events: await store.loadEvents(100),
  };
}

async function tables(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ t: string }>('SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema()')).rows.map((r) => r.t);
  } finally {
    await c.end();
  }
}

describePostgres('llmgw-server migrate --from-sqlite', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let untouched: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;
  let install: Awaited<ReturnType<typeof sqliteInstall>>;
  let first: Awaited<ReturnType<typeof migrate>>;

  beforeAll(async () => {
    [db, untouched] = await Promise.all([freshDatabase(), freshDatabase()]);
    dir = tmp();
    install = await sqliteInstall(dir);
    first = await migrate('--from-sqlite', path.join(dir, 'llmgw.db'), '--database-url', db.url);
  });
  afterAll(async () => {
    await db.drop();
    await untouched.drop();
  });

  it('copies every row, with the ids, admin states and events as they were, and says what it copied', async () => {
    expect([first.code, first.stderr]).toEqual([0, '']);
    expect(first.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^migrated 3 nodes, 2 node credentials, 2 replicas, 2 keys, 2 usage rows, 1 token, 3 events and secrets admin-token, join-token, engine-key-secret, tls/ca from ${path.join(dir, 'llmgw.db')} to \\S+$`,
        ),
      ),
    ]);
    const store = await PostgresStore.open(db.url);
    try {
      expect(await loadAll(store)).toEqual(install.rows);
      // New events continue after the migrated ones: a watcher's cursor stays valid.
      const [next] = await store.addEvents([event(0, 'uncordon', 'node/gpu-1')], KEEP);
      expect(next!.id).toBe(4);
    } finally {
      await store.close();
    }
  });

  it("copies the install's secrets, so an instance on the database takes its tokens, engine-key secret and CA", async () => {
    const store = await PostgresStore.open(db.url);
    const instance = tmp();
    try {
      await shareSecrets(store, instance, log);
    } finally {
      await store.close();
    }
    const read = (f: string) => fs.readFileSync(path.join(instance, f), 'utf8');
    expect(read('admin-token').trim()).toBe(install.admin);
    expect(read('engine-key-secret').trim()).toBe(install.engine);
    expect(read('join-token').trim()).toBe(install.join);
    expect([read('tls/ca.pem'), read('tls/ca-key.pem')]).toEqual([install.caPem, install.caKey]);
    // The join token an agent already holds (pinning this CA) is the one the instance writes.
    const tls = await adminTls({ dataDir: instance, listenHost: '127.0.0.1', extraSans: [] }, log);
    expect(prepareJoinToken(undefined, instance, tls.caPem).secret).toBe(install.join);
    expect(read('join-token')).toBe(fs.readFileSync(path.join(dir, 'join-token'), 'utf8'));
  });

  it('refuses a second migrate into the same database, changing nothing', async () => {
    const store = await PostgresStore.open(db.url);
    const before = await loadAll(store);
    await store.close();
    const again = await migrate('--from-sqlite', dir, '--database-url', db.url);
    expect(again.code).toBe(2);
    expect(again.stdout).toBe('');
    expect(again.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        /^llmgw-server: database \S+ already holds 3 nodes, 2 node credentials, 2 replicas, 2 keys, 2 usage rows, 1 token, 4 events: migrate only into an empty llmgw database/,
      ),
    ]);
    const after = await PostgresStore.open(db.url);
    try {
      expect(await loadAll(after)).toEqual(before);
    } finally {
      await after.close();
    }
  });

  it.each(Object.entries(BAD_STORES))('refuses a file that is %s, with exit 2 and one line, and writes nothing', async (_name, bad) => {
    const broken = tmp();
    await bad.write(broken);
    const file = path.join(broken, 'llmgw.db');
    const bytes = fs.readFileSync(file);
    const r = await migrate('--from-sqlite', file, '--database-url', untouched.url);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(bad.says)]);
    expect(r.stderr).toContain(`llmgw-server: store ${file} `);
    expect(fs.readFileSync(file).equals(bytes)).toBe(true);
    expect(await tables(untouched.url)).toEqual([]);
  });

  it('reads a store from an older server without upgrading it in place, and notes the secrets its directory lacks', async () => {
    const old = tmp();
    const s = new SqliteStore(old);
    await s.saveNodeAdmin('gpu-9', { state: 'cordoned' });
    await s.close();
    // The store as the server before events left it.
    const raw = new Database(path.join(old, 'llmgw.db'));
    raw.exec(
      'DROP TABLE events; DROP TABLE rollouts; ALTER TABLE api_keys DROP COLUMN priority; ALTER TABLE api_keys DROP COLUMN tpm; DROP TABLE usage_minutes; ALTER TABLE node_credentials DROP COLUMN join_hash',
    );
    raw.pragma(`user_version = ${SCHEMA_VERSION - 6}`);
    raw.pragma('wal_checkpoint(TRUNCATE)');
    raw.close();
    const bytes = fs.readFileSync(path.join(old, 'llmgw.db'));
    const target = await freshDatabase();
    try {
      const r = await migrate('--from-sqlite', old, '--database-url', target.url);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^migrated 1 node, 0 node credentials, 0 replicas, 0 keys, 0 usage rows, 0 tokens, 0 events and no secrets from /);
      expect(r.stderr.trimEnd().split('\n')).toEqual([
        expect.stringMatching(/^llmgw-server: note: \S+\/admin-token is absent: give every instance the same LLMGW_ADMIN_TOKEN/),
        expect.stringMatching(/join-token is absent/),
        expect.stringMatching(/engine-key-secret is absent: the first instance makes a new one, so engine keys change/),
        expect.stringMatching(/tls\/ca.pem is absent/),
      ]);
      expect(fs.readFileSync(path.join(old, 'llmgw.db')).equals(bytes)).toBe(true);
      const store = await PostgresStore.open(target.url);
      expect(await store.loadNodes()).toEqual([{ id: 'gpu-9', admin: { state: 'cordoned' } }]);
      await store.close();
    } finally {
      await target.drop();
    }
  });

  it('says which flag is missing, and refuses a database it cannot reach, with one line each', async () => {
    const noUrl = await migrate('--from-sqlite', dir);
    expect([noUrl.code, noUrl.stderr.trim()]).toEqual([
      2,
      expect.stringMatching(/^llmgw-server: give --database-url postgres:\/\/… \(or LLMGW_DATABASE_URL\)/),
    ]);
    const refused = await migrate('--from-sqlite', dir, '--database-url', 'postgres://llmgw:secret-pw@127.0.0.1:1/llmgw');
    expect(refused.code).toBe(2);
    expect(refused.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^llmgw-server: cannot reach PostgreSQL at llmgw@127.0.0.1:1\/llmgw/)]);
    expect(refused.stderr).not.toContain('secret-pw');
  });
});
