import { createHmac } from 'node:crypto';
import { newSecret, sameSecret } from '@llmgw/shared';

/**
 * The dashboard's cookie. Not `__Host-`: that prefix demands Secure, and the admin
 * listener is HTTPS by default but plain http under `--insecure-http` (a proxy in front
 * terminating TLS, or none), where the cookie is set without Secure (`isHttps` in
 * dashboard.ts).
 */
export const SESSION_COOKIE = 'llmgw_session';

/** How long a login lasts. Long enough for a shift, short enough that a lost laptop's cookie dies. */
export const SESSION_TTL_S = 12 * 3600;

/** A verified session: the nonce names it, the CSRF token protects its forms. */
export interface Session {
  nonce: string;
  expiresAtS: number;
  csrf: string;
  /** The token (`ctl tokens create`) it was opened with; absent for the bootstrap admin token. */
  tokenId?: string;
}

const b64 = (buf: Buffer) => buf.toString('base64url');

/**
 * Stateless sessions signed with a key derived from the admin token: the cookie holds
 * `v1.<expiry>.<nonce>.<mac>`, never the token, and a stolen cookie does not reveal it.
 * Deriving the key (rather than drawing a random one per process) keeps operators logged
 * in across a server restart, and changing the admin token logs every session out.
 * Logout revokes the nonce in memory until the session would have expired anyway.
 */
export class Sessions {
  private readonly key: Buffer;
  private readonly revoked = new Map<string, number>();

  constructor(
    adminToken: string,
    private readonly nowS: () => number = () => Math.floor(Date.now() / 1000),
  ) {
    this.key = createHmac('sha256', adminToken).update('llmgw dashboard session v1').digest();
  }

  private mac(data: string): string {
    return b64(createHmac('sha256', this.key).update(data).digest());
  }

  /**
   * A new session's cookie value: `v1.<expiry>.<nonce>.<mac>` for the bootstrap admin
   * token (as before tokens had roles, so sessions survive the upgrade), and
   * `v2.<expiry>.<nonce>.<token id>.<mac>` for a token with a role, whose role is looked
   * up on every request, so revoking the token ends its sessions.
   */
  issue(tokenId?: string): string {
    const base = `${this.nowS() + SESSION_TTL_S}.${newSecret('', 16)}`;
    const body = tokenId === undefined ? `v1.${base}` : `v2.${base}.${tokenId}`;
    return `${body}.${this.mac(body)}`;
  }

  /** The session a cookie value stands for, or undefined when forged, expired or logged out. */
  verify(value: string | undefined): Session | undefined {
    if (!value) return undefined;
    const parts = value.split('.');
    const v1 = parts.length === 4 && parts[0] === 'v1';
    if (!v1 && !(parts.length === 5 && parts[0] === 'v2')) return undefined;
    const mac = parts.pop()!;
    const [, exp = '', nonce = '', tokenId] = parts;
    if (!sameSecret(mac, this.mac(parts.join('.')))) return undefined;
    const expiresAtS = Number(exp);
    if (!Number.isInteger(expiresAtS) || expiresAtS <= this.nowS()) return undefined;
    if (this.revoked.has(nonce)) return undefined;
    return { nonce, expiresAtS, csrf: this.mac(`csrf.${nonce}`), ...(tokenId !== undefined ? { tokenId } : {}) };
  }

  /** Whether `given` is the CSRF token of `session`, in constant time. */
  csrfOk(session: Session, given: unknown): boolean {
    return typeof given === 'string' && sameSecret(given, session.csrf);
  }

  revoke(session: Session): void {
    const now = this.nowS();
    for (const [n, exp] of this.revoked) if (exp <= now) this.revoked.delete(n);
    this.revoked.set(session.nonce, session.expiresAtS);
  }
}

/** One cookie from a `Cookie` header; no dependency for a one-line job. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Failed logins per client address, so the token cannot be guessed at line speed. A
 * window per address rather than one global counter: a global one would let anyone
 * lock the operator out.
 */
export class LoginLimiter {
  private readonly failures = new Map<string, { count: number; resetAtMs: number }>();

  constructor(
    private readonly maxFailures = 10,
    private readonly windowMs = 5 * 60_000,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Seconds until `addr` may try again, or 0 when it may now. */
  blockedFor(addr: string): number {
    const e = this.failures.get(addr);
    if (!e || e.resetAtMs <= this.nowMs()) return 0;
    return e.count >= this.maxFailures ? Math.ceil((e.resetAtMs - this.nowMs()) / 1000) : 0;
  }

  fail(addr: string): void {
    const now = this.nowMs();
    if (this.failures.size > 10_000) for (const [a, e] of this.failures) if (e.resetAtMs <= now) this.failures.delete(a);
    const e = this.failures.get(addr);
    if (!e || e.resetAtMs <= now) this.failures.set(addr, { count: 1, resetAtMs: now + this.windowMs });
    else e.count++;
  }

  succeed(addr: string): void {
    this.failures.delete(addr);
  }
}
