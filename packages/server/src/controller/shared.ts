import type { Heartbeat, HeartbeatReply } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { Inventory } from '../inventory.js';
import type { RolloutRecord } from '../domain.js';
import type { Fence, Store, StoredNode, StoredReplica } from '../store/store.js';
import { latestRead } from '../store/serial.js';
import { frozen, withSpec } from './apply.js';
import { Controller, type CatalogView, type ControllerOptions } from './controller.js';

/** Whether this instance may plan now, and the fence its writes carry (cluster/lease.ts). */
export interface Leadership {
  isLeader(): boolean;
  fence(): Fence | undefined;
}

/**
 * The controller of one server instance among several on a shared store (PostgreSQL).
 * Every instance keeps the whole picture (replicas, nodes, shard statuses) to route and
 * to answer agents; only the leader plans. It writes each plan under its fence before
 * acting on it, so a leader that lost its lease (paused past it, cut off from the
 * database) is refused and changes nothing. The others follow the replicas the leader
 * wrote (`reloadReplicas`, on its NOTIFY) and the heartbeats other instances received
 * (`applyRemoteNode`, pulled from the database).
 */
export class SharedController extends Controller {
  /** Each node's last shard statuses, from its heartbeat here or at another instance: re-applied over reloaded replicas. */
  private readonly lastShards = new Map<string, Heartbeat>();
  private passing = false;
  private passAgain = false;
  /** The epoch of the last term this instance planned in, to log its first pass. */
  private plannedEpoch?: number;

  constructor(
    inventory: Inventory,
    store: Store,
    catalog: CatalogView,
    opts: ControllerOptions,
    log: Logger,
    private readonly leadership: Leadership,
    stored: readonly StoredReplica[] = [],
    rollouts: readonly RolloutRecord[] = [],
  ) {
    super(inventory, store, catalog, opts, log, stored, rollouts);
  }

  static async loadShared(
    inventory: Inventory,
    store: Store,
    catalog: CatalogView,
    opts: ControllerOptions,
    log: Logger,
    leadership: Leadership,
  ): Promise<SharedController> {
    return new SharedController(inventory, store, catalog, opts, log, leadership, await store.loadReplicas(), await store.loadRollouts());
  }

  override heartbeat(hb: Heartbeat): HeartbeatReply {
    // One older than the last heard (through the database, say) must not be re-applied over reloads.
    if (!this.inventory.olderThanHeld(hb.report.node_id, hb.seq)) this.lastShards.set(hb.report.node_id, hb);
    return super.heartbeat(hb);
  }

  /** Only the leader writes replica records; a follower's come from the leader. */
  override persist(changed: readonly string[] = []): Promise<boolean> {
    const fence = this.leadership.isLeader() ? this.leadership.fence() : undefined;
    return fence ? this.writes.persist(changed, fence) : Promise.resolve(true);
  }

  override reconcileNow(): void {
    void this.sharedPass();
  }

  /**
   * One pass at a time. A follower only follows the clock (liveness moves traffic) and
   * the replicas it has; the leader plans, writes the plan's replicas under its fence,
   * and only then hands them out and records its decisions.
   */
  private async sharedPass(): Promise<void> {
    if (this.passing) {
      this.passAgain = true;
      return;
    }
    this.passing = true;
    try {
      do {
        this.passAgain = false;
        const nowMs = this.now();
        const fence = this.leadership.isLeader() ? this.leadership.fence() : undefined;
        if (!fence) {
          this.followLiveness(nowMs, false);
          this.refreshAssignments();
          continue;
        }
        // A new term starts from what the database holds: the last leader may have written
        // a plan this instance has not reloaded yet, and planning without it would start a
        // replica twice.
        if (this.plannedEpoch !== fence.epoch) {
          try {
            await this.readReplicas();
          } catch (err) {
            this.log.warn({ err: (err as Error).message }, `new leader could not read the replicas, so it does not plan yet: ${(err as Error).message}`);
            continue;
          }
        }
        // A pause or resume may have come through another instance.
        try {
          await this.rollouts.settled();
          this.rollouts.replace(await this.store.loadRollouts());
        } catch (err) {
          this.log.warn({ err: (err as Error).message }, `rollout records not read, so this pass plans with the last ones: ${(err as Error).message}`);
        }
        const pass = this.planPass(this.now());
        if (pass.changed.length) {
          try {
            await this.store.writeReplicas(
              pass.changed.flatMap((id) => this.replicas.get(id) ?? []),
              pass.changed.filter((id) => !this.replicas.has(id)),
              fence,
            );
          } catch (err) {
            this.log.warn(
              { err: (err as Error).message, replicas: pass.changed.length },
              `reconcile pass not written, so not acted on: ${(err as Error).message}`,
            );
            await this.readReplicas().catch(() => undefined);
            continue;
          }
        }
        this.settlePass(pass);
        if (this.plannedEpoch !== fence.epoch) {
          this.plannedEpoch = fence.epoch;
          this.log.info(
            { epoch: fence.epoch, actions: pass.plan.actions.length },
            `first reconcile pass as leader (epoch ${fence.epoch}): ${pass.plan.actions.length} action(s)`,
          );
        }
      } while (this.passAgain);
    } catch (err) {
      // Nothing here may end the process (the pass runs from a timer, unawaited): rows
      // read from the database are input, and a wrong-shaped one must not crash it.
      this.log.error({ err: (err as Error).message }, `reconcile pass failed: ${(err as Error).message}`);
    } finally {
      this.passing = false;
    }
  }

  /**
   * On a follower, replaces the replicas in memory with the store's (the leader's NOTIFY,
   * the periodic reload), then applies the shard statuses heard since, which the leader's
   * records may not carry yet: a replica's state is derived from its reports. A leader's
   * own passes read the replicas themselves (`readReplicas`).
   */
  readonly reloadReplicas = latestRead(
    () => this.store.loadReplicas(),
    (stored) => {
      // A leader's memory is the database's (it alone writes replicas, and its passes read
      // them at each new term): a read that began before its last write committed would
      // undo that write here, and the next pass would place the replica again.
      if (this.leadership.isLeader()) return;
      this.install(stored);
    },
  );

  /** The pass's own read, serialized with its writes. */
  private async readReplicas(): Promise<void> {
    this.install(await this.store.loadReplicas());
  }

  private install(stored: readonly StoredReplica[]): void {
    this.replicas.clear();
    for (const r of stored) this.replicas.set(r.id, frozen(withSpec({ ...r, apiKey: this.engineKey(r.id) }, this.catalog.models)));
    for (const [nodeId, hb] of this.lastShards) this.applyShardStatus(nodeId, hb, false);
    this.events.emit('replicas');
    this.refreshAssignments();
  }

  /**
   * A node's row as another instance wrote it (its heartbeat reached that one): the
   * report, the admin state and the shard statuses; `seenAtMs` is its last heartbeat as
   * the database saw it, on this instance's clock.
   */
  applyRemoteNode(row: StoredNode, seenAtMs: number | undefined): void {
    const { changed, newer } = this.inventory.applyRemote(row, seenAtMs);
    let touched = false;
    // Only a heartbeat newer than the last one here: a pulled row may be older than one
    // that reached this instance directly since, and its shard statuses would undo it.
    if (newer && row.report && row.shards) {
      const hb: Heartbeat = { report: row.report, shards: row.shards, ...(row.seq !== undefined ? { seq: row.seq } : {}) };
      this.lastShards.set(row.id, hb);
      touched = this.applyShardStatus(row.id, hb);
    }
    if (changed || touched) this.notify();
  }

  /** Nodes another instance deleted. */
  forgetNodes(ids: readonly string[]): void {
    for (const id of ids) this.lastShards.delete(id);
    if (ids.length) this.notify();
  }
}
