import type { RequestHandler } from 'express';
import { DomainError } from '../errors.js';

/**
 * At most `max` requests of one node in flight at once (the node of `res.locals.nodeId`,
 * set by `requireNodeCredential`); the excess gets 429 `concurrency_limited` at once.
 * One node credential could otherwise hold every connection slot of the admin listener
 * with long-polls, which answer only when something changes. A request counts from here
 * until its response closes (sent, or the client gone).
 * @param what the requests counted, for the message ("requests", "long-polls")
 * @param flag the setting that raises the cap
 */
export function perNodeCap(max: number, what: string, flag: string): RequestHandler {
  const inFlight = new Map<string, number>();
  return (_req, res, next) => {
    const node = res.locals.nodeId as string | undefined;
    if (node === undefined) return next();
    const n = inFlight.get(node) ?? 0;
    if (n >= max) {
      return next(new DomainError('concurrency_limited', `node ${node} has ${n} ${what} in flight, the most one node may (${flag})`, { retryAfterS: 1 }));
    }
    inFlight.set(node, n + 1);
    res.once('close', () => {
      const left = (inFlight.get(node) ?? 1) - 1;
      if (left > 0) inFlight.set(node, left);
      else inFlight.delete(node);
    });
    next();
  };
}
