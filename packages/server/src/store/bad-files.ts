import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { SqliteStore } from './sqlite.js';

/**
 * Store files a server must refuse at start, written into `dir` as `llmgw.db`, for the
 * tests of `open.ts` (in process) and of the built `llmgw-server` (as a process). Each
 * comes with the words its refusal must contain.
 */
export const BAD_STORES: Record<string, { write(dir: string): void | Promise<void>; says: RegExp }> = {
  corrupt: {
    // A real store with usage spread over many pages, one of which is then overwritten.
    async write(dir) {
      const s = new SqliteStore(dir);
      await s.addUsage(
        Array.from({ length: 3000 }, (_, i) => ({ keyId: `key-${i}`, model: 'm', requests: 1, errors: 0, cancelled: 0, promptTokens: 1, completionTokens: 1 })),
      );
      await s.close();
      const fd = fs.openSync(path.join(dir, 'llmgw.db'), 'r+');
      fs.writeSync(fd, Buffer.alloc(4096, 0x5a), 0, 4096, 4096 * 3);
      fs.closeSync(fd);
    },
    says: /is corrupt \(.+\): restore it from a backup, or move it away/,
  },
  empty: {
    write: (dir) => fs.writeFileSync(path.join(dir, 'llmgw.db'), ''),
    says: /is empty \(0 bytes\), not an llmgw store: restore it from a backup, or delete it/,
  },
  foreign: {
    write(dir) {
      const db = new Database(path.join(dir, 'llmgw.db'));
      db.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)');
      db.close();
    },
    says: /is a SQLite database but not an llmgw store \(user_version 0, tables: invoices\): point --data-dir/,
  },
  'not SQLite': {
    write: (dir) => fs.writeFileSync(path.join(dir, 'llmgw.db'), 'nodes:\n  - gpu-1\n'),
    says: /is not a SQLite database: restore llmgw.db from a backup, or move the file away/,
  },
};
