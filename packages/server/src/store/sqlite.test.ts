import { afterEach, describe, expect, it } from '@jest/globals';
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
});
