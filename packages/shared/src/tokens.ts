import { Type, type Static } from '@sinclair/typebox';
import { TOKEN_ROLES } from './names.js';

/**
 * Tokens of the admin listener (admin API `/api/v1/tokens`), each with one role:
 * - `admin`: everything, like the bootstrap admin token from the environment or data dir;
 * - `viewer`: every GET of the admin API and the dashboard, read-only (no engine keys);
 * - `metrics`: `GET /metrics` only, for Prometheus.
 */

export const TokenCreateRequestSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  role: Type.Union(TOKEN_ROLES.map((r) => Type.Literal(r))),
});
export type TokenCreateRequest = Static<typeof TokenCreateRequestSchema>;

export const TokenViewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: Type.Union(TOKEN_ROLES.map((r) => Type.Literal(r))),
  /** The first characters of the secret, to tell tokens apart; the secret itself is never stored. */
  prefix: Type.String(),
  created_at: Type.String(),
  revoked_at: Type.Optional(Type.String()),
});
export type TokenView = Static<typeof TokenViewSchema>;

export const TokenCreatedSchema = Type.Object({
  token: TokenViewSchema,
  /** Shown once, at creation. */
  secret: Type.String(),
});
export type TokenCreated = Static<typeof TokenCreatedSchema>;
