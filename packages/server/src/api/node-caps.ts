import type { RequestHandler } from 'express';
import { DomainError } from '../errors.js';

/**
 * At most `max` requests of one node in flight at once; the excess gets 429
 * `concurrency_limited` at once. One node credential could otherwise hold every
 * connection slot of the admin listener with long-polls, which answer only when something
 * changes. A request counts from `enter` until its response closes (sent, or the client
 * gone). One count per cap, shared by every path that serves its requests: the heartbeat's
 * lean path (api/heartbeat.ts) and the express routes alike.
 */
export class NodeCap {
  private readonly inFlight = new Map<string, number>();

  /**
   * @param what the requests counted, for the message ("requests", "long-polls")
   * @param flag the setting that raises the cap
   */
  constructor(
    readonly max: number,
    private readonly what: string,
    private readonly flag: string,
  ) {}

  /** Counts one request of `node` until `closed` fires once; the refusal when the node is at its cap (nothing counted). */
  enter(node: string, closed: { once(event: 'close', fn: () => void): unknown }): DomainError | undefined {
    const n = this.inFlight.get(node) ?? 0;
    if (n >= this.max) {
      return new DomainError('concurrency_limited', `node ${node} has ${n} ${this.what} in flight, the most one node may (${this.flag})`, { retryAfterS: 1 });
    }
    this.inFlight.set(node, n + 1);
    closed.once('close', () => {
      const left = (this.inFlight.get(node) ?? 1) - 1;
      if (left > 0) this.inFlight.set(node, left);
      else this.inFlight.delete(node);
    });
    return undefined;
  }
}

/** `cap` as express middleware, for the node of `res.locals.nodeId` (set by `requireNodeCredential`). */
export function perNodeCap(cap: NodeCap): RequestHandler {
  return (_req, res, next) => {
    const node = res.locals.nodeId as string | undefined;
    if (node === undefined) return next();
    next(cap.enter(node, res));
  };
}
