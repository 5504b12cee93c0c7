import { X509Certificate, createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The one place llmgw's secrets are made, kept and checked, for the server, the agent
 * and ctl alike: generation, the stored hash, the constant-time compare, the 0600 file
 * and the join token's format. Node only (crypto and fs); nothing here is a wire type.
 */

/** The mode of every file that holds a secret: the owner reads and writes it, nobody else. */
export const SECRET_FILE_MODE = 0o600;

/**
 * A fresh secret: `prefix` (so a leaked one is recognisable) then `bytes` random bytes,
 * base64url. The default, 192 bits, is what tokens and keys get; node credentials take 256.
 */
export function newSecret(prefix: string, bytes = 24): string {
  return `${prefix}${randomBytes(bytes).toString('base64url')}`;
}

/**
 * How a secret llmgw hands out (client key, admin-listener token, node credential) is
 * stored: its SHA-256 in lowercase hex, never the secret itself. Stores written by
 * earlier versions hold exactly this, so it must not change. One-shot `crypto.hash`
 * rather than a Hash object: this runs on every client request and heartbeat, and the
 * object's set-up cost more than the digest of a short secret.
 */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/** A new secret with its stored forms: the hash, and a prefix to tell secrets apart in lists. */
export function newHashedSecret(prefix: string): { secret: string; hash: string; prefix: string } {
  const secret = newSecret(prefix);
  return { secret, hash: hashSecret(secret), prefix: secret.slice(0, prefix.length + 4) };
}

/**
 * Whether two secrets (or two hashes, MACs, pins) are the same, in constant time: how
 * long it takes says nothing about how much of `given` was right. Both are hashed first,
 * which makes the lengths equal, so not even the length of `expected` leaks.
 */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/**
 * The record in `byHash` (keyed by `hashSecret`) that `secret` is. Every store of issued
 * secrets is looked up this way, in memory: the lookup is by hash, which an attacker
 * cannot steer byte by byte, and the found record is confirmed in constant time, so
 * the rule holds even if the lookup ever changes.
 */
export function findBySecret<T extends { hash: string }>(byHash: ReadonlyMap<string, T>, secret: string): T | undefined {
  const hash = hashSecret(secret);
  const found = byHash.get(hash);
  return found && sameHash(hash, found.hash) ? found : undefined;
}

/**
 * Two hex hashes compared in constant time, without hashing them again as `sameSecret`
 * would: this runs on every authenticated request (client keys, heartbeats), where those
 * two extra SHA-256s were most of the lookup's cost. Hashes have one public length, so
 * comparing lengths first leaks nothing.
 */
function sameHash(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
}

/**
 * Writes a file only its owner may read (a token, a key, a credential, engine state with
 * API keys), whole or not at all, mode 0600 whatever the umask or an earlier file's mode:
 * the data goes to a temporary file beside it, which is flushed to disk, renamed over
 * it, and the rename flushed with the folder. A crash leaves the old content or the
 * new, never half a file, and a power cut after it returns keeps the new. The folder
 * must exist.
 */
export function writePrivateFile(file: string, data: string | Uint8Array): void {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    const fd = fs.openSync(tmp, 'w', SECRET_FILE_MODE);
    try {
      // open's mode applies only to a new file, and only what the umask leaves of it:
      // a temporary file left by a crashed process with the same pid keeps its own.
      fs.fchmodSync(fd, SECRET_FILE_MODE);
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  syncFolder(dir);
}

/** Flushes a folder's entries (a rename in it) to disk, where the platform can. */
function syncFolder(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch (err) {
    // Some platforms and file systems cannot open or sync a folder; the rename stands.
    if (!['EISDIR', 'EINVAL', 'EPERM', 'EACCES', 'ENOTSUP', 'EBADF'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * The join token, one format for the server that writes it and the agent that reads it.
 * Like k3s's secure token: `K10<sha256 of the CA certificate's DER, hex>::<secret>`. The
 * pin lets an agent check, before it sends the secret, that it talks to the server whose
 * CA the token names; the secret is what the server checks. A token without the `K10`
 * prefix is the secret alone (no pin), which an agent only accepts together with a CA file.
 */
const FULL_JOIN_TOKEN = /^K10([0-9a-f]{64})::(.+)$/;

/** A join token split into what the agent sends (`secret`) and what it checks (`caHash`). */
export interface JoinToken {
  secret: string;
  /** The pinned CA's SHA-256 in lowercase hex; absent for a bare secret. */
  caHash?: string;
  /**
   * Set when the token has a full token's shape (`K10…::…`) but its pin is not 64 hex
   * digits (cut short when pasted, say): what is wrong with it. `secret` is then the
   * whole token, as before, but an agent refuses it rather than call it a bare secret.
   */
  badPin?: string;
}

/** The SHA-256 of a PEM certificate's DER, lowercase hex: what a join token pins. */
export function caFingerprint(caPem: string): string {
  return createHash('sha256').update(new X509Certificate(caPem).raw).digest('hex');
}

/** The full join token: the secret pinned to the CA. */
export function fullJoinToken(secret: string, caPem: string): string {
  return `K10${caFingerprint(caPem)}::${secret}`;
}

/**
 * The token people, files and `ctl join-token rotate` are given for `secret`: the full
 * token pinning the admin listener's CA, or the secret alone without TLS (`--insecure-http`).
 */
export function renderJoinToken(secret: string, caPem: string | undefined): string {
  return caPem ? fullJoinToken(secret, caPem) : secret;
}

/** What looks like a full token, whatever its pin: `K10`, then the pin, then `::`. */
const PINNED_SHAPE = /^K10([^:]*)::(.+)$/;

/** Splits a join token; anything that is not a full token is a bare secret (`badPin` says when it looks like one). */
export function parseJoinToken(token: string): JoinToken {
  const t = token.trim();
  const m = FULL_JOIN_TOKEN.exec(t);
  if (m) return { secret: m[2]!, caHash: m[1]! };
  const shaped = PINNED_SHAPE.exec(t);
  if (!shaped) return { secret: t };
  const pin = shaped[1]!;
  const badPin = /^[0-9a-fA-F]*$/.test(pin)
    ? `its CA pin (after K10, before ::) has ${pin.length} hex digits, not 64`
    : `its CA pin (after K10, before ::) is not hex: ${JSON.stringify(pin.slice(0, 16))}${pin.length > 16 ? '…' : ''}`;
  return { secret: t, badPin };
}

/** Whether `caPem` is the CA `caHash` pins, compared in constant time. */
export function pinMatches(caHash: string, caPem: string): boolean {
  return sameSecret(caHash.toLowerCase(), caFingerprint(caPem));
}
