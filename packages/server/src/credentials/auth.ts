import type { NextFunction, Request, Response } from 'express';
import { DomainError, echo } from '../errors.js';
import { bearerToken } from '../http/principal.js';
import type { Membership } from './membership.js';

/** `POST /agent/v1/join` only: the join token, and nothing else, may join. */
export function requireJoinToken(m: Membership) {
  return (req: Request, res: Response, next: NextFunction) => {
    const given = bearerToken(req.headers.authorization);
    if (!given) return next(new DomainError('unauthenticated', 'missing join token: send "Authorization: Bearer <join token>"'));
    if (!m.joinToken.matches(given)) return next(new DomainError('unauthenticated', 'invalid join token'));
    // Counted only for the right token: someone without it cannot use up the fleet's joins.
    const waitS = m.joinRate.take();
    if (waitS !== undefined) {
      res.setHeader('Retry-After', String(waitS));
      return next(
        new DomainError('rate_limited', `too many joins with this join token (--join-rate ${m.joinRate.perMinute} per minute): try again in ${waitS} s`, {
          retryAfterS: waitS,
        }),
      );
    }
    next();
  };
}

/**
 * Every other agent call: a node credential, whose node is put in `res.locals.nodeId`
 * for `ownNode`. The join token is refused here with a line that says what it is for.
 */
export function requireNodeCredential(m: Membership) {
  return (req: Request, res: Response, next: NextFunction) => {
    const given = bearerToken(req.headers.authorization);
    if (!given)
      return next(
        new DomainError('unauthenticated', 'missing node credential: send "Authorization: Bearer <node credential>" (POST /agent/v1/join gives one)'),
      );
    const nodeId = m.credentials.nodeOf(given);
    if (nodeId) {
      res.locals.nodeId = nodeId;
      return next();
    }
    if (m.joinToken.matches(given)) {
      return next(new DomainError('unauthenticated', 'the join token only joins: trade it for a node credential with POST /agent/v1/join, and send that'));
    }
    next(new DomainError('unauthenticated', 'unknown node credential (was the node deleted with ctl nodes delete?): join again with the join token'));
  };
}

/** Refuses (403) a call about any node but the one the credential belongs to. */
export function ownNode(res: Response, nodeId: string, field: string): void {
  ownNodeOf(res.locals.nodeId as string | undefined, nodeId, field);
}

/** `ownNode` for a caller that knows the credential's node (`own`) without express. */
export function ownNodeOf(own: string | undefined, nodeId: string, field: string): void {
  if (own !== nodeId) {
    throw new DomainError('forbidden', `this credential belongs to node ${own ?? '(none)'}: it may report and read that node only, not "${echo(nodeId)}"`, {
      field,
    });
  }
}
