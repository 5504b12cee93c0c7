import fs from 'node:fs';
import path from 'node:path';
import { SECRET_FILE_MODE, newSecret, writePrivateFile } from '@llmgw/shared';

/**
 * Who may read what the server keeps: the data directory is 0700 and every file in it
 * that holds a secret or the database is 0600, whatever the umask was. The database is
 * not a secret by itself (no engine key, client keys and tokens only as hashes), but it
 * maps the fleet, and its -wal file holds recent writes in full.
 */
export const DIR_MODE = 0o700;

/**
 * Creates the data directory as 0700, or tightens an existing one that is looser.
 * Returns the mode it had when it was tightened (for the log), else undefined.
 */
export function secureDataDir(dir: string): number | undefined {
  fs.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  return tighten(dir, DIR_MODE);
}

/** The mode bits of `file` when they gave more than `mode` away and were set to `mode`; undefined when already tight or absent. */
export function tighten(file: string, mode: number): number | undefined {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return undefined;
  }
  const had = st.mode & 0o777;
  if ((had & ~mode) === 0) return undefined;
  fs.chmodSync(file, mode);
  return had;
}

/**
 * The database and the -wal and -shm files beside it, 0600. SQLite gives new -wal and
 * -shm files the database file's mode, so tightening the database first is enough for
 * files made later; existing ones from an older server are tightened here too.
 */
export function secureDatabaseFiles(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) tighten(f, SECRET_FILE_MODE);
}

/** `0o755` as `0755`, the way ls and chmod say it. */
export function octal(mode: number): string {
  return `0${mode.toString(8)}`;
}

/**
 * Returns the token from the environment, or the one kept in `<dataDir>/<name>`,
 * generating it on first start (like k3s's node-token): a fresh install is never
 * left open, and the operator finds the secret in one known place.
 */
export function tokenFor(fromEnv: string | undefined, dataDir: string, name: string): { token: string; file?: string } {
  if (fromEnv) return { token: fromEnv };
  const file = path.join(dataDir, name);
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    // A file from an older server or another umask may be readable by others.
    tighten(file, SECRET_FILE_MODE);
    if (existing) return { token: existing, file };
  } catch {
    /* first start */
  }
  secureDataDir(dataDir);
  const token = newToken(name);
  writePrivateFile(file, `${token}\n`);
  return { token, file };
}

/**
 * A fresh secret for the file `name`: `llmgw-admin-…` for admin-token, `llmgw-join-…`
 * for join-token (also what a rotation draws), `llmgw-engine-key-secret-…`.
 */
export function newToken(name: string): string {
  return newSecret(`llmgw-${name.replace(/-token$/, '')}-`);
}
