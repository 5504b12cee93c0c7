import express, { type Router } from 'express';
import { TokenCreateRequestSchema } from '@llmgw/shared';
import type { AccessTokens } from './access.js';
import { ADMIN_EVENTS } from '../events/admin-events.js';
import { jsonBody, parseBody } from '../http/http.js';
import { adminRoute } from './routes.js';

/**
 * `/api/v1/tokens`: tokens of the admin listener with a role (`ctl tokens`). Mounted
 * behind the same check as the rest of the admin API, so listing is a read (viewers
 * see names, roles and prefixes, never a secret) and create and revoke need an admin.
 */
export function tokensApi(tokens: AccessTokens): Router {
  const r = express.Router();
  adminRoute(r, '/tokens', {
    get: (_req, res) => {
      res.json(tokens.list());
    },
    post: {
      audit: ADMIN_EVENTS.tokenCreate,
      handle: [
        ...jsonBody('64kb'),
        async (req, res) => {
          res.status(201).json(await tokens.create(parseBody(TokenCreateRequestSchema, req.body)));
        },
      ],
    },
  });

  adminRoute(r, '/tokens/:id', {
    delete: {
      audit: ADMIN_EVENTS.tokenRevoke,
      handle: async (req, res) => {
        res.json(await tokens.revoke(String(req.params.id)));
      },
    },
  });
  return r;
}
