import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import type { NodeReport } from '@llmgw/shared';
import type { AdminState, Replica } from './domain.js';

export interface StoredNode {
  id: string;
  admin: AdminState;
  report?: NodeReport;
  lastSeenMs?: number;
}

/**
 * What must survive a server restart. An interface so a PostgreSQL implementation can
 * serve several server instances later; SQLite (one file, no setup) is the default.
 * Liveness is not stored: it is soft state, rebuilt from heartbeats.
 */
export interface Store {
  loadNodes(): StoredNode[];
  saveNodeAdmin(id: string, admin: AdminState): void;
  saveNodeReport(id: string, report: NodeReport, lastSeenMs: number): void;
  loadReplicas(): Replica[];
  saveReplica(replica: Replica): void;
  deleteReplica(id: string): void;
  close(): void;
}

const MIGRATIONS = [
  `CREATE TABLE nodes (
     id TEXT PRIMARY KEY,
     admin_state TEXT NOT NULL DEFAULT 'ready',
     admin_reason TEXT,
     admin_changed_at TEXT,
     report TEXT,
     last_seen_ms INTEGER
   );
   CREATE TABLE replicas (
     id TEXT PRIMARY KEY,
     model TEXT NOT NULL,
     data TEXT NOT NULL
   );`,
];

/** SQLite store in `<dataDir>/llmgw.db`, WAL mode so readers never wait on the writer. */
export class SqliteStore implements Store {
  private readonly db: Database.Database;

  constructor(dataDir: string) {
    fs.mkdirSync(dataDir, { recursive: true });
    this.db = new Database(path.join(dataDir, 'llmgw.db'));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.migrate();
  }

  private migrate(): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    for (let v = version; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]!);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
  }

  loadNodes(): StoredNode[] {
    const rows = this.db.prepare('SELECT * FROM nodes ORDER BY id').all() as {
      id: string;
      admin_state: AdminState['state'];
      admin_reason: string | null;
      admin_changed_at: string | null;
      report: string | null;
      last_seen_ms: number | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      admin: {
        state: r.admin_state,
        ...(r.admin_reason ? { reason: r.admin_reason } : {}),
        ...(r.admin_changed_at ? { changedAt: r.admin_changed_at } : {}),
      },
      ...(r.report ? { report: JSON.parse(r.report) as NodeReport } : {}),
      ...(r.last_seen_ms != null ? { lastSeenMs: r.last_seen_ms } : {}),
    }));
  }

  saveNodeAdmin(id: string, admin: AdminState): void {
    this.db
      .prepare(
        `INSERT INTO nodes (id, admin_state, admin_reason, admin_changed_at) VALUES (?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET admin_state = excluded.admin_state,
           admin_reason = excluded.admin_reason, admin_changed_at = excluded.admin_changed_at`,
      )
      .run(id, admin.state, admin.reason ?? null, admin.changedAt ?? null);
  }

  saveNodeReport(id: string, report: NodeReport, lastSeenMs: number): void {
    this.db
      .prepare(
        `INSERT INTO nodes (id, report, last_seen_ms) VALUES (?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET report = excluded.report, last_seen_ms = excluded.last_seen_ms`,
      )
      .run(id, JSON.stringify(report), lastSeenMs);
  }

  loadReplicas(): Replica[] {
    const rows = this.db.prepare('SELECT data FROM replicas ORDER BY id').all() as { data: string }[];
    return rows.map((r) => JSON.parse(r.data) as Replica);
  }

  saveReplica(replica: Replica): void {
    this.db
      .prepare(
        `INSERT INTO replicas (id, model, data) VALUES (?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET model = excluded.model, data = excluded.data`,
      )
      .run(replica.id, replica.model, JSON.stringify(replica));
  }

  deleteReplica(id: string): void {
    this.db.prepare('DELETE FROM replicas WHERE id = ?').run(id);
  }

  close(): void {
    this.db.close();
  }
}
