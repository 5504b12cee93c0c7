import fs from 'node:fs';
import path from 'node:path';
import { SECRET_FILE_MODE, newSecret, writePrivateFile } from '@llmgw/shared';
import { secureDataDir, tighten } from '../store/modes.js';

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

const BEARER = /^Bearer\s+(.+)$/i;

/** The credential of an `Authorization: Bearer <token>` header, on any listener. */
export function bearerToken(authorization: string | undefined): string | undefined {
  const m = authorization ? BEARER.exec(authorization) : null;
  return m?.[1]?.trim();
}
