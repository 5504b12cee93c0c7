import express, { type Router } from 'express';
import { adminRoute } from './routes.js';
import { ADMIN_EVENTS } from '../events/admin-events.js';
import type { Membership } from '../credentials/membership.js';

/**
 * The admin API's membership routes, mounted beside `adminApi` behind the same admin
 * token: `ctl nodes delete`, `ctl nodes approve` and `ctl join-token rotate`.
 */
export function membershipApi(m: Membership): Router {
  const r = express.Router();

  adminRoute(r, '/nodes/:id', {
    delete: {
      audit: ADMIN_EVENTS.nodeDelete,
      handle: async (req, res) => {
        res.json(await m.delete(String(req.params.id), req.query.force === 'true'));
      },
    },
  });

  adminRoute(r, '/nodes/:id/approve', {
    post: {
      audit: ADMIN_EVENTS.nodeApprove,
      handle: async (req, res) => {
        res.json(await m.approve(String(req.params.id)));
      },
    },
  });

  adminRoute(r, '/join-token/rotate', {
    post: {
      audit: ADMIN_EVENTS.joinTokenRotate,
      handle: async (_req, res) => {
        res.json(await m.rotateJoinToken());
      },
    },
  });

  return r;
}
