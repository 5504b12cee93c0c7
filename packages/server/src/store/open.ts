import Database from 'better-sqlite3';
import fs from 'node:fs';
import { secureDatabaseFiles } from './modes.js';
import { migrate, SCHEMA_VERSION, tablesAt } from './schema.js';

/**
 * Why a store file was refused at start. Its message is one line for the operator: the
 * path, what is wrong with it, and what to do; main prints it and exits non-zero.
 */
export class StoreOpenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreOpenError';
  }
}

const SQLITE_HEADER = 'SQLite format 3\u0000';

/**
 * Opens the store at `file`, or creates it when the file does not exist. An existing
 * file is used only when it is an intact llmgw store: an empty file, a file that is not
 * SQLite, a SQLite database without llmgw's schema, one from a newer server, or one that
 * fails `PRAGMA quick_check` is refused, never silently treated as (or turned into) a
 * new, empty store, which would forget every key and every replica.
 */
export function openDatabase(file: string): Database.Database {
  let size: number;
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) throw new StoreOpenError(`store ${file} is not a file: point --data-dir at a directory where llmgw.db can be a file`);
    size = st.size;
  } catch (err) {
    if (err instanceof StoreOpenError) throw err;
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new StoreOpenError(`cannot read store ${file}: ${(err as Error).message}`);
    create(file);
    return open(file);
  }
  refuseNonStore(file, size);
  return open(file);
}

/** Refuses a file that cannot be an llmgw store by its size or header, before SQLite reads it. */
function refuseNonStore(file: string, size: number): void {
  if (size === 0) {
    throw new StoreOpenError(
      `store ${file} is empty (0 bytes), not an llmgw store: restore it from a backup, or delete it if no store was ever written there to start with a new one`,
    );
  }
  if (readHeader(file) !== SQLITE_HEADER) {
    throw new StoreOpenError(`store ${file} is not a SQLite database: restore llmgw.db from a backup, or move the file away to start with a new store`);
  }
}

/**
 * Opens an existing store read-only, with the checks `openDatabase` makes but without
 * its migrations: nothing in the file is changed (`llmgw-server migrate`
 * reads a store this way). An absent file is refused too.
 */
export function openReadOnly(file: string): Database.Database {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (err) {
    throw new StoreOpenError(
      `cannot read store ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'there is no such file' : (err as Error).message}`,
    );
  }
  if (!st.isFile()) throw new StoreOpenError(`store ${file} is not a file: give the llmgw.db of a data directory`);
  refuseNonStore(file, st.size);
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    check(db, file);
    return db;
  } catch (err) {
    db?.close();
    if (err instanceof StoreOpenError) throw err;
    throw corrupt(file, oneLine(err));
  }
}

function readHeader(file: string): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(SQLITE_HEADER.length);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).toString('latin1');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A new store is built beside its final name and renamed into place once its schema is
 * complete, so a start interrupted half-way never leaves behind a file that the next
 * start would have to refuse.
 */
function create(file: string): void {
  const tmp = `${file}.new`;
  for (const f of [tmp, `${tmp}-wal`, `${tmp}-shm`]) fs.rmSync(f, { force: true });
  // Made 0600 before SQLite creates the -wal beside it, which then gets the same mode.
  fs.writeFileSync(tmp, '', { mode: 0o600 });
  const db = new Database(tmp);
  try {
    db.pragma('journal_mode = WAL');
    migrate(db);
  } finally {
    db.close();
  }
  fs.renameSync(tmp, file);
}

function open(file: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    secureDatabaseFiles(file);
    db = new Database(file, { fileMustExist: true });
    check(db, file);
  } catch (err) {
    db?.close();
    if (err instanceof StoreOpenError) throw err;
    throw corrupt(file, oneLine(err));
  }
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // Deleted content is overwritten, not left in free pages: a record written by an
    // older server (an engine key in clear, before the step that removed them) must not outlive its removal.
    db.pragma('secure_delete = ON');
    const before = db.pragma('user_version', { simple: true }) as number;
    migrate(db);
    // The WAL keeps the pages as they were before the migration until it is overwritten.
    if (before < SCHEMA_VERSION) db.pragma('wal_checkpoint(TRUNCATE)');
    return db;
  } catch (err) {
    db.close();
    throw new StoreOpenError(`cannot open store ${file} for writing (${oneLine(err)}): check the disk has room and the file is writable, then start again`);
  }
}

function check(db: Database.Database, file: string): void {
  const rows = db.pragma('quick_check') as { quick_check: string }[];
  // One line: SQLite may answer a finding over several ("*** in database main ***\nTree 4 …").
  const first = (rows[0]?.quick_check ?? 'no answer').replace(/\s*\n\s*/g, ' ');
  if (first !== 'ok') throw corrupt(file, `quick_check: ${first}${rows.length > 1 ? ` and ${rows.length - 1} more` : ''}`);
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new StoreOpenError(
      `store ${file} has schema version ${version}, newer than this llmgw-server knows (${SCHEMA_VERSION}): run the newer llmgw-server, or restore a backup`,
    );
  }
  const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name));
  const missing = tablesAt(version).filter((t) => !tables.has(t));
  if (version === 0 || missing.length) {
    const found = [...tables].sort().slice(0, 5).join(', ') || 'none';
    throw new StoreOpenError(
      `store ${file} is a SQLite database but not an llmgw store (user_version ${version}, tables: ${found}): point --data-dir at llmgw's own directory, or move the file away to start with a new store`,
    );
  }
}

function corrupt(file: string, detail: string): StoreOpenError {
  return new StoreOpenError(
    `store ${file} is corrupt (${detail}): restore it from a backup, or move it away (with any -wal and -shm files beside it) to start with a new store`,
  );
}

/** An error as one short line: a SQLite message can span lines. */
function oneLine(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown };
  const msg = typeof e.message === 'string' ? e.message : String(err);
  const line = msg.split('\n', 1)[0]!.slice(0, 200);
  return typeof e.code === 'string' ? `${line}, ${e.code}` : line;
}
