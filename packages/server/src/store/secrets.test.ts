import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { makeReplica } from '../../test/factories.js';
import { tokenFor } from './modes.js';
/** The step that removes stored keys (and makes admin_tokens): the sixth. */
const ADMIN_TOKENS_STEP = 6;
import { SqliteStore } from './sqlite.js';
import { tempDirs } from '../../test/temp-dirs.js';

const tmp = tempDirs('llmgw-secrets-', afterEach);
const mode = (f: string) => fs.statSync(f).mode & 0o777;
const KEY = 'sk-llmgw-engine-stored-in-clear-by-an-older-server';

describe('who may read the data directory', () => {
  it('a new data directory is 0700, the database and its -wal and -shm files 0600', async () => {
    const dir = path.join(tmp(), 'data');
    const s = new SqliteStore(dir);
    await s.writeReplicas([makeReplica()], []);
    expect(mode(dir)).toBe(0o700);
    for (const f of ['llmgw.db', 'llmgw.db-wal', 'llmgw.db-shm']) expect([f, mode(path.join(dir, f))]).toEqual([f, 0o600]);
    await s.close();
  });

  it('an existing directory and database readable by others are tightened at start', async () => {
    const dir = tmp();
    await new SqliteStore(dir).close();
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(path.join(dir, 'llmgw.db'), 0o644);
    const s = new SqliteStore(dir);
    expect(mode(dir)).toBe(0o700);
    expect(mode(path.join(dir, 'llmgw.db'))).toBe(0o600);
    await s.close();
  });

  it('token and secret files are 0600, also one left looser by an older server', async () => {
    const dir = tmp();
    const made = tokenFor(undefined, dir, 'engine-key-secret');
    expect(mode(made.file!)).toBe(0o600);
    fs.chmodSync(made.file!, 0o644);
    expect(tokenFor(undefined, dir, 'engine-key-secret').token).toBe(made.token);
    expect(mode(made.file!)).toBe(0o600);
  });
});

describe('engine keys are not stored', () => {
  it('a replica is written without its key', async () => {
    const dir = tmp();
    const s = new SqliteStore(dir);
    await s.writeReplicas([makeReplica({ apiKey: KEY })], []);
    expect(await s.loadReplicas()).toEqual([expect.not.objectContaining({ apiKey: expect.anything() })]);
    await s.close();
    expect(fs.readFileSync(path.join(dir, 'llmgw.db')).includes(KEY)).toBe(false);
  });

  it('keys an older server stored are removed by the upgrade, from the file and its WAL too', async () => {
    const dir = tmp();
    await new SqliteStore(dir).close();
    // The store as the previous version left it: a replica record with its key in clear.
    const db = new Database(path.join(dir, 'llmgw.db'));
    // The steps after the one that removes keys (admin_tokens is made in it; events, rollouts, keys' priority, tpm, usage per minute and credentials' join hash after it) are undone too.
    db.exec(
      'DROP TABLE admin_tokens; DROP TABLE events; DROP TABLE rollouts; ALTER TABLE api_keys DROP COLUMN priority; ALTER TABLE api_keys DROP COLUMN tpm; DROP TABLE usage_minutes; ALTER TABLE node_credentials DROP COLUMN join_hash',
    );
    db.prepare('INSERT INTO replicas (id, model, data) VALUES (?, ?, ?)').run('r-1', 'm', JSON.stringify({ ...makeReplica(), apiKey: KEY }));
    db.pragma(`user_version = ${ADMIN_TOKENS_STEP - 1}`);
    db.close();
    const s = new SqliteStore(dir);
    expect((await s.loadReplicas()).map((r) => [r.id, r.apiKey])).toEqual([['r-1', undefined]]);
    await s.close();
    for (const f of fs.readdirSync(dir)) expect([f, fs.readFileSync(path.join(dir, f)).includes(KEY)]).toEqual([f, false]);
  });
});
