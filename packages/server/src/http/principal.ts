import type { Response } from 'express';
import type { TokenRole } from '@llmgw/shared';

/**
 * Who a request comes from, read the same way on every listener and by every surface
 * (the admin API, its audit, the gateway). Kept below `api/` because the events and the
 * gateway read it too.
 */

const BEARER = /^Bearer\s+(.+)$/i;

/** The credential of an `Authorization: Bearer <token>` header, on any listener. */
export function bearerToken(authorization: string | undefined): string | undefined {
  const m = authorization ? BEARER.exec(authorization) : null;
  return m?.[1]?.trim();
}

/** Who a request on the admin listener comes from. `tokenId` is absent for the bootstrap admin token. */
export interface Principal {
  role: TokenRole;
  name: string;
  tokenId?: string;
}

/** The principal `requireRole` (api/access.ts) let through, kept in `res.locals.who`. */
export function principalOf(res: Response): Principal | undefined {
  return res.locals.who as Principal | undefined;
}
