import type { JoinReply } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { Controller } from '../controller/controller.js';
import { DomainError, echo, notFound } from '../errors.js';
import { JoinRate } from './join-rate.js';
import type { JoinToken } from './join-token.js';
import type { NodeCredentials } from './node-credentials.js';
import type { CredentialSightings } from './sightings.js';

/** `--join-approval`: whether a new node may take work at once, or waits for `ctl nodes approve`. */
export type JoinApproval = 'auto' | 'manual';
export const JOIN_APPROVALS: readonly JoinApproval[] = ['auto', 'manual'];

/**
 * Who is in the fleet: joining (the join token traded for a node credential), approval,
 * deletion and the join token's rotation. The controller keeps the nodes; this decides
 * who may become one.
 */
export class Membership {
  constructor(
    private readonly ctl: Controller,
    readonly credentials: NodeCredentials,
    readonly joinToken: JoinToken,
    readonly approval: JoinApproval,
    private readonly log: Logger,
    /** How fast the join token may join (`--join-rate`); `auth.ts` takes from it before a join. */
    readonly joinRate: JoinRate = new JoinRate(60),
    /** Where each credential was heard from: a node deleted or given a new credential starts afresh there. */
    private readonly sightings?: CredentialSightings,
  ) {}

  /**
   * A node joins under its id and gets its credential. An id that already has one is
   * refused (409), and nothing of that node changes — unless it is the same join again
   * (`joinId` matches the one that issued the credential: a retry whose reply was lost),
   * which gets a fresh credential in place of the one it never received. A node the inventory knows without
   * a credential — from a database older than credentials — is claimed by its first
   * join and keeps its admin state and replicas (see the store README: upgrading).
   */
  async join(nodeId: string, joinId?: string): Promise<JoinReply> {
    const now = new Date(this.ctl.now());
    const known = this.ctl.inventory.get(nodeId);
    if (!known && !this.credentials.has(nodeId)) {
      await this.ctl.inventory.add(
        nodeId,
        this.approval === 'manual' ? { state: 'pending-approval', changedAt: now.toISOString() } : { state: 'ready' },
        now.getTime(),
      );
    }
    const again = this.credentials.has(nodeId);
    let credential: string;
    try {
      credential = await this.credentials.issue(nodeId, now, joinId);
    } catch (err) {
      if (again) this.log.warn({ node: nodeId }, `refused a join as node ${nodeId}, which has already joined with its own credential`);
      throw err;
    }
    // A new credential: the places the old one was heard from say nothing of it.
    this.sightings?.forget(nodeId);
    const state = this.ctl.inventory.get(nodeId)?.admin.state === 'pending-approval' ? 'pending-approval' : 'ready';
    this.log.info(
      { node: nodeId, state, claimed: Boolean(known), ...(again ? { retried: true } : {}) },
      again
        ? `node ${nodeId} joined again with the same join id (its first reply was lost): its credential is replaced`
        : state === 'pending-approval'
          ? `node ${nodeId} joined and waits for approval (ctl nodes approve ${nodeId})`
          : `node ${nodeId} joined`,
    );
    this.ctl.notify();
    return { node_id: nodeId, credential, state };
  }

  /** `ctl nodes approve`: a node waiting under manual approval may take work. */
  async approve(nodeId: string): Promise<{ id: string; state: 'ready' }> {
    await this.ctl.inventory.approve(nodeId, new Date(this.ctl.now()));
    this.log.info({ node: nodeId }, `node ${nodeId} approved`);
    this.ctl.notify();
    return { id: nodeId, state: 'ready' };
  }

  /**
   * `ctl nodes delete`: forgets a node and its credential, which frees its id for the
   * next join. Refused while replicas have a shard on it, unless `force`: they are then
   * dropped, and the next reconcile pass places them elsewhere.
   */
  async delete(nodeId: string, force: boolean): Promise<{ id: string; deleted: true; replicas_dropped: number }> {
    if (!this.ctl.inventory.get(nodeId) && !this.credentials.has(nodeId)) throw notFound(`no node "${echo(nodeId)}" (see ctl nodes)`);
    const holding = this.ctl.listReplicas().filter((r) => r.shards.some((s) => s.nodeId === nodeId));
    if (holding.length > 0 && !force) {
      throw new DomainError(
        'conflict',
        `node ${nodeId} holds ${holding.length} replica(s) (${holding.map((r) => r.id).join(', ')}): drain it first (ctl drain ${nodeId}), or delete it with --force, which drops them so they are placed elsewhere`,
      );
    }
    // The store first: a refused write (503) leaves the node and its credential as they were.
    await this.ctl.inventory.remove(nodeId);
    this.credentials.forget(nodeId);
    this.sightings?.forget(nodeId);
    this.log.info({ node: nodeId, replicasDropped: holding.length }, `node ${nodeId} deleted; its id is free to join again`);
    this.ctl.notify();
    return { id: nodeId, deleted: true, replicas_dropped: holding.length };
  }

  /** `ctl join-token rotate`: a new join token; joined nodes keep their credentials. */
  async rotateJoinToken(): Promise<{ token: string }> {
    const token = await this.joinToken.rotate();
    this.joinRate.reset();
    this.log.info('join token rotated: joined nodes keep their credentials; the old token no longer joins');
    return { token };
  }
}
