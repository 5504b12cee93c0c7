import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { SECRET_FILE_MODE, parseJoinToken, sameSecret, writePrivateFile } from '@llmgw/shared';
import { newToken, secureDataDir, tighten } from '../store/modes.js';
import { createCa } from '../tls/certs.js';
import { readPair, tlsFiles } from '../tls/tls.js';

/**
 * Where instances on one database agree on their secrets: PostgresStore's `secrets`
 * table. `sharedSecret` stores `fallback()` under `name` unless a value is there
 * already, and returns the value that is there: the first instance's wins, atomically.
 */
export interface SharedSecrets {
  sharedSecret(name: string, fallback: () => string): Promise<string>;
}

/** The secrets instances share, by their name in the `secrets` table. */
export const SECRET_NAMES = ['admin-token', 'join-token', 'engine-key-secret', 'tls/ca'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

/** What `shareSecrets` leaves alone: a secret the environment or a flag supplies on this instance. */
export interface ShareOptions {
  /** LLMGW_ADMIN_TOKEN and LLMGW_JOIN_TOKEN; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Whether this instance uses the generated CA (false with --insecure-http or --tls-cert). Default true. */
  ca?: boolean;
}

/**
 * Makes this instance's secret files the ones every instance on the database uses,
 * before start-up reads them as with SQLite (tokenFor, prepareJoinToken, adminTls):
 * the admin token, the join secret, the engine-key secret (engine keys are
 * HMAC(secret, replica id), so instances that disagreed would restart each other's
 * engines) and the CA (an agent's pin, from the join token, then holds for every
 * instance; each still issues its own listener certificate from it, for its own names:
 * adminTls reissues one the CA did not sign).
 *
 * For each secret the first instance's value wins: its existing file's (an upgraded
 * single-server install keeps its tokens), else a new one. A file that differs from
 * the database's value is replaced, with a warning that names the file, never the secret.
 */
export async function shareSecrets(db: SharedSecrets, dataDir: string, log: Logger, options: ShareOptions = {}): Promise<void> {
  const env = options.env ?? process.env;
  secureDataDir(dataDir);
  if (!env.LLMGW_ADMIN_TOKEN) await shareToken(db, dataDir, 'admin-token', log);
  if (!env.LLMGW_JOIN_TOKEN) await shareToken(db, dataDir, 'join-token', log);
  await shareToken(db, dataDir, 'engine-key-secret', log);
  if (options.ca ?? true) await shareCa(db, dataDir, log);
}

/**
 * The secret a data directory's file holds, or undefined when there is none: the join
 * token file holds the full token (the secret pinned to the CA), the others the bare secret.
 */
export function localSecret(dataDir: string, name: Exclude<SecretName, 'tls/ca'>): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dataDir, name), 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${path.join(dataDir, name)}: ${(err as Error).message}`, { cause: err });
  }
  if (!text) return undefined;
  return name === 'join-token' ? parseJoinToken(text).secret : text;
}

/** The CA of a data directory as the `tls/ca` secret holds it (JSON: cert and key, PEM), or undefined when there is none. */
export function localCa(dataDir: string): string | undefined {
  const files = tlsFiles(dataDir);
  const pair = readPair(files.ca, files.caKey);
  if (pair) return JSON.stringify({ cert: pair.cert, key: pair.key });
  if (fs.existsSync(files.ca) || fs.existsSync(files.caKey)) {
    throw new Error(`${files.dir} has only one of ca.pem and ca-key.pem: restore the other, or remove both to take the CA the other instances share`);
  }
  return undefined;
}

async function shareToken(db: SharedSecrets, dataDir: string, name: Exclude<SecretName, 'tls/ca'>, log: Logger): Promise<void> {
  const file = path.join(dataDir, name);
  const local = localSecret(dataDir, name);
  const shared = await db.sharedSecret(name, () => local ?? newToken(name));
  if (local !== undefined && sameSecret(shared, local)) {
    tighten(file, SECRET_FILE_MODE);
    return;
  }
  // The join token file gets the bare secret here; prepareJoinToken rewrites it with the CA pin.
  writePrivateFile(file, `${shared}\n`);
  if (local !== undefined)
    log.warn({ file }, `${name} in this data directory differs from the one the instances on this database share: replaced the file with the shared one`);
}

async function shareCa(db: SharedSecrets, dataDir: string, log: Logger): Promise<void> {
  const files = tlsFiles(dataDir);
  const local = localCa(dataDir);
  // Made before asking (making one is async, the fallback is not); a few ms, and only without a CA of its own.
  const fallback = local ?? JSON.stringify(await createCa('llmgw CA'));
  const shared = await db.sharedSecret('tls/ca', () => fallback);
  if (local !== undefined && sameSecret(shared, local)) return;
  const ca = parseCa(shared);
  fs.mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  writePrivateFile(files.caKey, ca.key);
  writePrivateFile(files.ca, ca.cert);
  // The CA certificate is public: readable like the one adminTls writes.
  fs.chmodSync(files.ca, 0o644);
  if (local !== undefined)
    log.warn(
      { file: files.ca },
      'the CA in this data directory differs from the one the instances on this database share: replaced it (join tokens pinning the old CA must be handed out again)',
    );
}

/** The `tls/ca` secret's certificate and key; throws a line naming the table when it is not one. */
export function parseCa(value: string): { cert: string; key: string } {
  try {
    const v = JSON.parse(value) as { cert?: unknown; key?: unknown };
    if (typeof v.cert === 'string' && typeof v.key === 'string') return { cert: v.cert, key: v.key };
  } catch {
    /* reported below */
  }
  throw new Error("the secrets table's tls/ca is not a CA (JSON with cert and key): restore it from a backup of the database");
}
