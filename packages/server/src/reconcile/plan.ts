import type { Model } from '@llmgw/shared';
import type { Replica } from '../domain.js';
import type { NodeSnapshot, PlacementOutcome } from '../snapshot.js';
import type { CreateCode, PlannedAction, PlannedReplica, RemoveCode, UpdateCode } from './actions.js';
import type { ReconcileInput } from './input.js';
import type { Fleet } from './placement.js';
import { isHalted, type RolloutHalt } from './rollout.js';

/**
 * One pass's picture of the world as its steps change it: the snapshot it started from
 * plus the actions planned so far. Each step reads it and adds actions; nothing here
 * reaches outside the input, so a pass stays a pure function of its snapshot. The input
 * is never mutated: a replica a step changes is copied first.
 */
export class Plan {
  readonly actions: PlannedAction[] = [];
  /** The last placement attempt per model, for `explain`. */
  readonly attempts = new Map<string, PlacementOutcome>();
  /** Replicas each model should have, after autoscaling. */
  readonly desired = new Map<string, number>();
  readonly lowSince: Map<string, number>;
  /** Set when lost nodes' replicas are not being replaced, and why. */
  paused?: string;
  /** Nodes where a replica of each model failed and is removed in this pass: not straight back there. */
  readonly failedOn = new Map<string, string[]>();
  /** Rollouts this pass found failing, for the caller to store (`rollout.ts`). */
  readonly halts: RolloutHalt[] = [];
  /** Why a model's rollout cannot replace its next replica now. */
  readonly rolloutBlocked = new Map<string, string>();
  /** Resources of the replicas left after the removals; set by the pipeline before drains place anything. */
  fleet?: Fleet;
  readonly models: ReadonlyMap<string, Model>;
  readonly nodes: ReadonlyMap<string, NodeSnapshot>;
  private readonly removed = new Set<string>();
  private readonly updated = new Map<string, Replica>();
  private readonly created: PlannedReplica[] = [];
  private liveCache?: Replica[];

  constructor(readonly input: ReconcileInput) {
    this.lowSince = new Map(input.lowSince);
    this.models = new Map(input.models.map((m) => [m.name, m]));
    this.nodes = new Map(input.nodes.map((n) => [n.id, n]));
  }

  get nowMs(): number {
    return this.input.nowMs;
  }

  /** Existing replicas not removed so far, as changed so far. */
  live(): Replica[] {
    this.liveCache ??= this.input.replicas.filter((r) => !this.removed.has(r.id)).map((r) => this.updated.get(r.id) ?? r);
    return this.liveCache;
  }

  /**
   * Whether the rollout of `model` to its current revision is halted (stored, or found
   * this pass): new replicas then run what the serving ones run, not the failing revision.
   */
  halted(model: string): boolean {
    const revision = this.input.revisions?.get(model);
    return revision !== undefined && (isHalted(this.input.rollouts?.get(model), revision) || this.halts.some((h) => h.model === model));
  }

  /** Replicas this pass creates, so far. */
  creations(): readonly PlannedReplica[] {
    return this.created;
  }

  remove(r: Replica, code: RemoveCode, reason: string): void {
    if (this.removed.has(r.id)) return;
    this.removed.add(r.id);
    this.liveCache = undefined;
    this.actions.push({ kind: 'remove', code, replicaId: r.id, model: r.model, reason });
  }

  /** Changes a copy of `r` (made on its first change this pass) and records why. */
  update(r: Replica, code: UpdateCode, reason: string, change: (copy: Replica) => void): void {
    let copy = this.updated.get(r.id);
    if (!copy) {
      copy = { ...r, shards: r.shards.map((s) => ({ ...s })) };
      this.updated.set(r.id, copy);
    }
    change(copy);
    this.liveCache = undefined;
    this.actions.push({ kind: 'update', code, replicaId: r.id, model: r.model, reason, replica: copy });
  }

  /**
   * Whether a replacement has been ready for `minHealthyMs`: only then does the replica it
   * replaces (on a draining node, or of an earlier revision) stop taking traffic.
   */
  healthy(x: Replica): boolean {
    return x.state === 'ready' && this.nowMs - (x.readySinceMs ?? this.nowMs) >= this.input.policy.minHealthyMs;
  }

  /** Stops sending `r` new traffic; it is removed once its requests finish (`drainsFinished`). */
  stepDown(r: Replica, code: UpdateCode, reason: string): void {
    this.update(r, code, reason, (u) => {
      u.state = 'draining';
      u.drainStartedMs = this.nowMs;
      u.drainReason = reason;
      delete u.drainBlocked;
    });
  }

  create(replica: PlannedReplica, code: CreateCode, reason: string): void {
    this.created.push(replica);
    this.actions.push({ kind: 'create', code, replica, reason });
  }
}
