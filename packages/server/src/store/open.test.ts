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
  it.each(Object.entries(BAD_STORES))('refuses a %s file with one line naming it, and leaves it as it was', (_name, bad) => {
    const dir = dataDir();
    bad.write(dir);
    const file = path.join(dir, 'llmgw.db');
    const before = fs.readFileSync(file);
    let err: unknown;
    try {
      new SqliteStore(dir).close();
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

  it('refuses a store written by a newer server', () => {
    const dir = dataDir();
    new SqliteStore(dir).close();
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => new SqliteStore(dir)).toThrow(`has schema version ${SCHEMA_VERSION + 1}, newer than this llmgw-server knows (${SCHEMA_VERSION})`);
  });

  it('brings a store from before usage.cancelled up, its usage rows counting no cancelled requests', () => {
    const dir = dataDir();
    new SqliteStore(dir).close();
    // Roll back to version 3, before the cancelled column (step 4) and what came after it.
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.exec('ALTER TABLE usage DROP COLUMN cancelled; DROP TABLE node_credentials; DROP TABLE admin_tokens; DROP TABLE events');
    db.prepare("INSERT INTO usage (key_id, model, requests, errors, prompt_tokens, completion_tokens) VALUES ('key-1', 'm', 3, 1, 10, 4)").run();
    db.pragma('user_version = 3');
    db.close();
    const s = new SqliteStore(dir);
    expect(s.loadUsage()).toEqual([{ keyId: 'key-1', keyName: 'key-1', model: 'm', requests: 3, errors: 1, cancelled: 0, promptTokens: 10, completionTokens: 4 }]);
    s.addUsage([{ keyId: 'key-1', model: 'm', requests: 1, errors: 0, cancelled: 1, promptTokens: 0, completionTokens: 2 }]);
    expect(s.loadUsage()).toEqual([expect.objectContaining({ requests: 4, cancelled: 1, completionTokens: 6 })]);
    s.close();
    const db2 = new Database(path.join(dir, 'llmgw.db'));
    expect(db2.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db2.close();
  });

  it('brings a store from before node credentials up: its nodes stay, with no credential yet', () => {
    const dir = dataDir();
    new SqliteStore(dir).close();
    const db = new Database(path.join(dir, 'llmgw.db'));
    db.exec("DROP TABLE node_credentials; DROP TABLE admin_tokens; DROP TABLE events; INSERT INTO nodes (id, admin_state) VALUES ('old-node', 'cordoned')");
    db.pragma('user_version = 4');
    db.close();
    const s = new SqliteStore(dir);
    expect(s.loadNodes()).toEqual([expect.objectContaining({ id: 'old-node', admin: { state: 'cordoned' } })]);
    expect(s.loadCredentials()).toEqual([]);
    s.saveCredential({ nodeId: 'old-node', hash: 'h', createdAt: '2026-01-01T00:00:00.000Z' });
    s.deleteNode('old-node');
    expect([s.loadNodes(), s.loadCredentials()]).toEqual([[], []]);
    s.close();
  });

  it('creates a store where there is none, even over the leftovers of an interrupted creation', () => {
    const dir = dataDir();
    fs.writeFileSync(path.join(dir, 'llmgw.db.new'), '');
    const s = new SqliteStore(dir);
    s.saveKey({ id: 'k', name: 'n', hash: 'h', prefix: 'p', models: [], createdAt: '2026-01-01T00:00:00.000Z' });
    s.close();
    expect(fs.existsSync(path.join(dir, 'llmgw.db.new'))).toBe(false);
    expect(new SqliteStore(dir).loadKeys()).toHaveLength(1);
  });
});

describe('SqliteStore.transaction', () => {
  it('writes everything or nothing', () => {
    const s = new SqliteStore(dataDir());
    const replica = (id: string) => ({ id, model: 'm', profile: 'p', state: 'starting', shards: [], createdAtMs: 1 }) as never;
    expect(() =>
      s.transaction(() => {
        s.saveReplica(replica('r-1'));
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(s.loadReplicas()).toEqual([]);
    s.transaction(() => {
      s.saveReplica(replica('r-1'));
      s.saveReplica(replica('r-2'));
    });
    expect(s.loadReplicas().map((r) => r.id)).toEqual(['r-1', 'r-2']);
    s.probe();
    s.close();
  });
});
