import fs from 'node:fs';
import path from 'node:path';
import { parseJoinToken, renderJoinToken, sameSecret, writePrivateFile } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import { newToken, tokenFor } from '../store/modes.js';

/**
 * The server's join token: the secret it accepts now, where it is kept, and how it is
 * rotated. Its format (the full token pinning the CA, or the bare secret) is
 * `@llmgw/shared`'s, the agent's too.
 */

/** Where the full join token is kept for the operator (and `llmgw-server join-token`). */
export function joinTokenFile(dataDir: string): string {
  return path.join(dataDir, 'join-token');
}

/**
 * The join secret (what agents send), from `LLMGW_JOIN_TOKEN` (a bare secret or a full
 * token) or the data directory, generated on first start; then `<data-dir>/join-token`
 * is (re)written, mode 0600, with the full token pinning `caPem`, so it is right also
 * when the secret came from the environment or the CA changed. Without a CA
 * (`--insecure-http`) the file holds the bare secret.
 */
export function prepareJoinToken(fromEnv: string | undefined, dataDir: string, caPem: string | undefined): { secret: string; file: string } {
  const { token } = tokenFor(fromEnv, dataDir, 'join-token');
  const secret = parseJoinToken(token).secret;
  const file = joinTokenFile(dataDir);
  writePrivateFile(file, `${renderJoinToken(secret, caPem)}\n`);
  return { secret, file };
}

/** `llmgw-server join-token`: the token agents need, as the server last wrote it. */
export function readJoinToken(dataDir: string): string {
  const file = joinTokenFile(dataDir);
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    /* reported below */
  }
  if (!text) throw new Error(`no join token in ${file}: start llmgw-server once with --data-dir ${dataDir}, which writes it`);
  return text;
}

/**
 * The join token the server accepts now. It only joins: a node trades it once for its
 * own credential (`NodeCredentials`), so rotating it leaves joined nodes working and
 * stops the old token from joining anything new.
 *
 * Rotation and `LLMGW_JOIN_TOKEN`: the environment always wins. A server whose secret
 * comes from the environment (`file` undefined) refuses to rotate, because a restart
 * would bring the old secret back; the operator changes the variable instead. A
 * generated secret lives in `<data-dir>/join-token`, and a rotation rewrites that file
 * (atomically, 0600) before the new secret is used, so a restart keeps it.
 */
export class JoinToken {
  constructor(
    private secret: string,
    /** Where the secret is kept; undefined when `LLMGW_JOIN_TOKEN` provides it. */
    private readonly file?: string,
    /**
     * The token people and `<data-dir>/join-token` get for a secret: the full token
     * pinning the admin listener's CA (`renderJoinToken`), or the secret alone without TLS.
     */
    private readonly render: (secret: string) => string = (secret) => secret,
    /**
     * On a shared store, where every instance's join secret is kept (cluster/secrets.ts):
     * a rotation is written there first, and the others adopt it on its NOTIFY.
     */
    private readonly shared?: { setSharedSecret(name: string, value: string): Promise<void> },
  ) {}

  /** True for the secret, alone or inside a full token (agents send the secret alone). */
  matches(given: string): boolean {
    return sameSecret(parseJoinToken(given).secret, this.secret);
  }

  /** Replaces the secret; returns the new token as `render` renders it. */
  async rotate(next: string = newToken('join-token')): Promise<string> {
    if (!this.file) {
      throw new DomainError(
        'conflict',
        'this server takes its join token from LLMGW_JOIN_TOKEN, which ctl cannot change: set a new value there and restart the server (joined nodes keep working with their own credentials)',
      );
    }
    if (this.shared) {
      try {
        await this.shared.setSharedSecret('join-token', next);
      } catch (err) {
        throw new DomainError('store_unavailable', `cannot store the new join token in the database: ${(err as Error).message}; the old token still joins`);
      }
    }
    return this.adopt(next);
  }

  /** Takes a secret another instance rotated to (or this one just stored): the file, then memory. */
  adopt(next: string): string {
    const token = this.render(next);
    if (sameSecret(next, this.secret)) return token;
    if (this.file) {
      try {
        writePrivateFile(this.file, `${token}\n`);
      } catch (err) {
        throw new DomainError('store_unavailable', `cannot write the new join token to ${this.file}: ${(err as Error).message}; the old token still joins`);
      }
    }
    this.secret = next;
    return token;
  }
}
