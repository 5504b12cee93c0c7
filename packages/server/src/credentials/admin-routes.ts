import express, { type Router } from 'express';
import { methodNotAllowed } from '../api/http.js';
import type { Membership } from './membership.js';

/**
 * The admin API's membership routes, mounted beside `adminApi` behind the same admin
 * token: `ctl nodes delete`, `ctl nodes approve` and `ctl join-token rotate`.
 */
export function membershipApi(m: Membership): Router {
  const r = express.Router();

  r.route('/nodes/:id').delete(async (req, res) => {
    res.json(await m.delete(String(req.params.id), req.query.force === 'true'));
  }).all(methodNotAllowed);

  r.route('/nodes/:id/approve').post(async (req, res) => {
    res.json(await m.approve(String(req.params.id)));
  }).all(methodNotAllowed);

  r.route('/join-token/rotate').post(async (_req, res) => {
    res.json(await m.rotateJoinToken());
  }).all(methodNotAllowed);

  return r;
}
