import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import type { NodeReport } from '@llmgw/shared';
import { SCHEMA_VERSION } from './schema.js';
import { SqliteStore } from './sqlite.js';
import type { StoredKey } from './store.js';
import { tempDirs } from '../../test/temp-dirs.js';

const dataDir = tempDirs('llmgw-store-', afterEach);

const key: StoredKey = { id: 'key-1', name: 'ci', hash: 'ab', prefix: 'sk-llmgw-abc', models: ['m'], rpm: 5, createdAt: '2026-01-01T00:00:00.000Z' };

describe('SqliteStore', () => {
  it('keeps keys, usage and node admin state across a reopen of the same directory', async () => {
    const dir = dataDir();
    const a = new SqliteStore(dir);
    await a.saveKey(key);
    await a.addUsage([{ keyId: 'key-1', model: 'm', requests: 2, errors: 1, cancelled: 1, promptTokens: 10, completionTokens: 3 }]);
    await a.addUsage([{ keyId: 'key-1', model: 'm', requests: 1, errors: 0, cancelled: 1, promptTokens: 5, completionTokens: 1 }]);
    await a.saveNodeAdmin('n1', { state: 'draining', reason: 'swap', drainDeadline: '2026-01-02T00:00:00.000Z' });
    await a.close();

    // Opening again runs no migration twice and finds everything.
    const b = new SqliteStore(dir);
    expect(await b.loadKeys()).toEqual([key]);
    expect(await b.loadUsage()).toEqual([
      { keyId: 'key-1', keyName: 'ci', model: 'm', requests: 3, errors: 1, cancelled: 2, promptTokens: 15, completionTokens: 4 },
    ]);
    expect(await b.loadNodes()).toEqual([{ id: 'n1', admin: { state: 'draining', reason: 'swap', drainDeadline: '2026-01-02T00:00:00.000Z' } }]);
    await b.close();
  });

  // Issue 27: 140 nodes' reports grew the file to 555 MB, which their deletion did not give back.
  describe('gives back the space of deleted nodes', () => {
    const report = (id: string): NodeReport => ({
      node_id: id,
      hostname: id,
      mgmt_addr: '10.0.0.1',
      agent_version: '1',
      labels: {},
      gpus: [{ index: 0, name: 'g', class: 'g', problems: Array.from({ length: 16 }, (_, i) => `${i}`.padEnd(256, 'p')) }],
      fabrics: [],
      estimated_sources: Array.from({ length: 100 }, (_, i) => `https://h.invalid/${i}`.padEnd(2000, 'x')),
    });
    const fill = async (store: SqliteStore) => {
      const ids = Array.from({ length: 20 }, (_, i) => `n${i}`);
      await store.saveNodeReports(ids.map((id) => ({ id, report: report(id), lastSeenMs: 1 })));
      for (const id of ids) await store.deleteNode(id);
    };
    const pages = (dir: string) => {
      const db = new Database(path.join(dir, 'llmgw.db'));
      const p = {
        autoVacuum: db.pragma('auto_vacuum', { simple: true }),
        free: db.pragma('freelist_count', { simple: true }),
        count: db.pragma('page_count', { simple: true }) as number,
        size: db.pragma('page_size', { simple: true }) as number,
      };
      db.close();
      return p;
    };

    it('in a new store', async () => {
      const dir = dataDir();
      const store = new SqliteStore(dir);
      await fill(store);
      await store.close();
      const p = pages(dir);
      // 20 reports of 200 KB each were about 4 MB; what is left is the empty schema.
      expect(p).toMatchObject({ autoVacuum: 2, free: 0 });
      expect(p.count * p.size).toBeLessThan(256 * 1024);
    });

    it('in a store from before, once the migration has rewritten it', async () => {
      const dir = dataDir();
      await new SqliteStore(dir).close();
      const db = new Database(path.join(dir, 'llmgw.db'));
      db.pragma('auto_vacuum = NONE');
      db.exec('VACUUM');
      // Before the auto-vacuum step, and so before the join hash that came after it.
      db.exec('ALTER TABLE node_credentials DROP COLUMN join_hash');
      db.pragma(`user_version = ${SCHEMA_VERSION - 2}`);
      db.close();
      expect(pages(dir).autoVacuum).toBe(0);
      const store = new SqliteStore(dir);
      await fill(store);
      await store.close();
      expect(pages(dir)).toMatchObject({ autoVacuum: 2, free: 0 });
    });
  });
});
