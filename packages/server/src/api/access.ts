import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { newHashedSecret, sameSecret, type TokenCreateRequest, type TokenRole, type TokenView } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import type { Store, StoredToken } from '../store/store.js';
import { bearerToken, type Principal } from '../http/principal.js';
import { IssuedSecrets } from '../store/issued.js';
import { latestRead } from '../store/serial.js';

export type Resolved = { ok: true; who: Principal } | { ok: false; reason: 'missing' | 'invalid' | 'revoked' };

/**
 * The tokens of the admin listener: the bootstrap admin token (from LLMGW_ADMIN_TOKEN or
 * `<data-dir>/admin-token`, never stored in the database, always admin) and the tokens
 * made with `ctl tokens create`, each with a role, stored as SHA-256 like client keys
 * and looked up in memory. A create or revoke is written to the store before memory
 * changes, so one the store refuses (503) leaves the tokens as they were.
 */
export class AccessTokens {
  private readonly tokens: IssuedSecrets<StoredToken>;
  private readonly save = (t: StoredToken) => this.store.saveToken(t);

  constructor(
    private readonly store: Store,
    private readonly bootstrapAdmin: string,
    private readonly now: () => number = Date.now,
    stored: readonly StoredToken[] = [],
  ) {
    this.tokens = new IssuedSecrets(stored);
  }

  /** The tokens the store holds, beside the bootstrap admin. */
  static async load(store: Store, bootstrapAdmin: string, now: () => number = Date.now): Promise<AccessTokens> {
    return new AccessTokens(store, bootstrapAdmin, now, await store.loadTokens());
  }

  /** Replaces what memory holds with the store's tokens (another instance created or revoked one); the newest read wins. */
  readonly reload = latestRead(
    () => this.store.loadTokens(),
    (stored) => this.tokens.replace(stored),
  );

  async create(req: TokenCreateRequest): Promise<{ token: TokenView; secret: string }> {
    const name = req.name.trim();
    if (!name) throw new DomainError('invalid_request', 'name must not be blank', { field: 'name' });
    const { secret, hash, prefix } = newHashedSecret(`llmgw-${req.role}-`);
    const t: StoredToken = { id: `tok-${randomBytes(4).toString('hex')}`, name, role: req.role, hash, prefix, createdAt: new Date(this.now()).toISOString() };
    await this.tokens.put(t, this.save);
    return { token: tokenView(t), secret };
  }

  list(): TokenView[] {
    return this.tokens.all().map(tokenView);
  }

  /** Revokes by id (or by the name of a live token); it stops working at once, dashboard sessions included. */
  async revoke(idOrName: string): Promise<TokenView> {
    const t = await this.tokens.revoke(idOrName, new Date(this.now()).toISOString(), this.save);
    if (!t) throw new DomainError('not_found', `no token "${idOrName}" (see ctl tokens list)`);
    return tokenView(t);
  }

  /** Who `secret` is: the bootstrap admin, a live token, or nobody. */
  resolve(secret: string | undefined): Resolved {
    if (!secret) return { ok: false, reason: 'missing' };
    if (sameSecret(secret, this.bootstrapAdmin)) return { ok: true, who: { role: 'admin', name: 'admin token' } };
    const t = this.tokens.find(secret);
    if (!t) return { ok: false, reason: 'invalid' };
    if (t.revokedAt) return { ok: false, reason: 'revoked' };
    return { ok: true, who: principal(t) };
  }

  /** The live token with this id (a dashboard session names it), or undefined once revoked. */
  live(id: string): Principal | undefined {
    const t = this.tokens.get(id);
    return t && !t.revokedAt ? principal(t) : undefined;
  }
}

const principal = (t: StoredToken): Principal => ({ role: t.role, name: t.name, tokenId: t.id });

function tokenView(t: StoredToken): TokenView {
  return { id: t.id, name: t.name, role: t.role, prefix: t.prefix, created_at: t.createdAt, ...(t.revokedAt ? { revoked_at: t.revokedAt } : {}) };
}

/** What a role may do on the admin API: admin everything, viewer reads (GET, HEAD), metrics nothing. */
export function mayUseAdminApi(role: TokenRole, method: string): boolean {
  return role === 'admin' || (role === 'viewer' && (method === 'GET' || method === 'HEAD'));
}

/** One line saying why `who` may not do this and what would do it. */
export function forbidden(who: Principal, what: string): DomainError {
  const why = who.role === 'metrics' ? 'may only scrape /metrics' : 'may only read';
  return new DomainError('forbidden', `${who.role} token "${who.name}" ${why}; ${what} needs an admin token (ctl tokens create --role admin)`);
}

/**
 * Requires a token of the admin listener and lets `allowed` decide by its role; the
 * principal is kept in `res.locals.who` for handlers that check more (show_keys).
 * A missing, unknown or revoked token is a 401, a known one without the right a 403.
 */
export function requireRole(tokens: AccessTokens, what: string, allowed: (role: TokenRole, req: Request) => boolean) {
  return (req: Request, res: Response, next: NextFunction) => {
    const r = tokens.resolve(bearerToken(req.headers.authorization));
    if (!r.ok) {
      const msg =
        r.reason === 'missing' ? `missing ${what}: send "Authorization: Bearer <token>"` : r.reason === 'revoked' ? `the token was revoked` : `invalid ${what}`;
      return next(new DomainError('unauthenticated', msg));
    }
    if (!allowed(r.who.role, req)) return next(forbidden(r.who, `${req.method} ${req.baseUrl}${req.path}`));
    res.locals.who = r.who;
    next();
  };
}
