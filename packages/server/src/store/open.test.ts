import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { BAD_STORES } from './bad-files.js';
import { StoreOpenError } from './open.js';
import { SCHEMA_VERSION } from './schema.js';
import { SqliteStore } from './sqlite.js';
import { tempDirs } from '../../test/temp-dirs.js';

const dataDir = tempDirs('llmgw-open-', afterEach);

describe('opening the store', () => {
  it.each(Object.entries(BAD_STORES))('refuses a %s file with one line naming it, and leaves it as it was', async (_name, bad) => {
    const dir = dataDir();
    await bad.write(dir);
    const file = path.join(dir, 'llmgw.db');
    const before = fs.readFileSync(file);
    let err: unknown;
    try {
      await new SqliteStore(dir).close();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreOpenError);
    const message = (err as Error).message;
    expect(message).toContain(`store ${file} `);
    expect(message).toMatch(bad.says);
    expect(message).not.toContain('\n');
    expect(fs.readFileSync(file).equals(before)).toBe(true);
  });

  it('refuses a store written by a newer server', async () => {
    const dir = dataDir();
    await new SqliteStore(dir).close();
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => new SqliteStore(dir)).toThrow(`has schema version ${SCHEMA_VERSION + 1}, newer than this llmgw-server knows (${SCHEMA_VERSION})`);
  });

  it('brings a store from before usage.cancelled up, its usage rows counting no cancelled requests', async () => {
    const dir = dataDir();
    await new SqliteStore(dir).close();
    // Roll back to version 3, before the cancelled column (step 4) and what came after it.
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.exec(
      'ALTER TABLE usage DROP COLUMN cancelled; DROP TABLE node_credentials; DROP TABLE admin_tokens; DROP TABLE events; DROP TABLE rollouts; ALTER TABLE api_keys DROP COLUMN priority; ALTER TABLE api_keys DROP COLUMN tpm; DROP TABLE usage_minutes',
    );
    db.prepare("INSERT INTO usage (key_id, model, requests, errors, prompt_tokens, completion_tokens) VALUES ('key-1', 'm', 3, 1, 10, 4)").run();
    db.pragma('user_version = 3');
    db.close();
    const s = new SqliteStore(dir);
    expect(await s.loadUsage()).toEqual([
      { keyId: 'key-1', keyName: 'key-1', model: 'm', requests: 3, errors: 1, cancelled: 0, promptTokens: 10, completionTokens: 4 },
    ]);
    await s.addUsage([{ keyId: 'key-1', model: 'm', requests: 1, errors: 0, cancelled: 1, promptTokens: 0, completionTokens: 2 }]);
    expect(await s.loadUsage()).toEqual([expect.objectContaining({ requests: 4, cancelled: 1, completionTokens: 6 })]);
    await s.close();
    const db2 = new Database(path.join(dir, 'llmgw.db'));
    expect(db2.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db2.close();
  });

  it('brings a store from before node credentials up: its nodes stay, with no credential yet', async () => {
    const dir = dataDir();
    await new SqliteStore(dir).close();
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.exec(
      "DROP TABLE node_credentials; DROP TABLE admin_tokens; DROP TABLE events; DROP TABLE rollouts; ALTER TABLE api_keys DROP COLUMN priority; ALTER TABLE api_keys DROP COLUMN tpm; DROP TABLE usage_minutes; INSERT INTO nodes (id, admin_state) VALUES ('old-node', 'cordoned')",
    );
    db.pragma('user_version = 4');
    db.close();
    const s = new SqliteStore(dir);
    expect(await s.loadNodes()).toEqual([expect.objectContaining({ id: 'old-node', admin: { state: 'cordoned' } })]);
    expect(await s.loadCredentials()).toEqual([]);
    await s.addCredential({ nodeId: 'old-node', hash: 'h', createdAt: '2026-01-01T00:00:00.000Z' });
    await s.deleteNode('old-node');
    expect([await s.loadNodes(), await s.loadCredentials()]).toEqual([[], []]);
    await s.close();
  });

  it('creates a store where there is none, even over the leftovers of an interrupted creation', async () => {
    const dir = dataDir();
    fs.writeFileSync(path.join(dir, 'llmgw.db.new'), '');
    const s = new SqliteStore(dir);
    await s.saveKey({ id: 'k', name: 'n', hash: 'h', prefix: 'p', models: [], createdAt: '2026-01-01T00:00:00.000Z' });
    await s.close();
    expect(fs.existsSync(path.join(dir, 'llmgw.db.new'))).toBe(false);
    expect(await new SqliteStore(dir).loadKeys()).toHaveLength(1);
  });
});

describe('SqliteStore.writeReplicas', () => {
  it('writes everything or nothing', async () => {
    const s = new SqliteStore(dataDir());
    const replica = (id: string) => ({ id, model: 'm', profile: 'p', state: 'starting', shards: [], createdAtMs: 1 }) as never;
    // A record SQLite cannot take (a model that is not text) fails the whole batch, r-1 included.
    await expect(s.writeReplicas([replica('r-1'), { ...(replica('r-2') as object), model: { not: 'text' } } as never], [])).rejects.toThrow(/parameter/);
    expect(await s.loadReplicas()).toEqual([]);
    await s.writeReplicas([replica('r-1'), replica('r-2'), replica('r-3')], []);
    await s.writeReplicas([], ['r-3']);
    expect((await s.loadReplicas()).map((r) => r.id)).toEqual(['r-1', 'r-2']);
    await s.probe();
    await s.close();
  });
});
