import { randomBytes } from 'node:crypto';
import { DomainError } from '../errors.js';
import { parseJoinToken } from '@llmgw/shared';
import { secretEquals } from '../api/tokens.js';
import { writeSecretFile } from '../store/modes.js';

/** A fresh join secret, in the format `tokenFor` generates on first start. */
export function newJoinSecret(): string {
  return `llmgw-join-${randomBytes(24).toString('base64url')}`;
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
     * pinning the admin listener's CA (`fullJoinToken`), or the secret alone without TLS.
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
    return secretEquals(parseJoinToken(given).secret, this.secret);
  }

  /** Replaces the secret; returns the new token as `render` renders it. */
  async rotate(next: string = newJoinSecret()): Promise<string> {
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
    if (next === this.secret) return token;
    if (this.file) {
      try {
        writeSecretFile(this.file, `${token}\n`);
      } catch (err) {
        throw new DomainError('store_unavailable', `cannot write the new join token to ${this.file}: ${(err as Error).message}; the old token still joins`);
      }
    }
    this.secret = next;
    return token;
  }
}
