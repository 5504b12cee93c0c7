import { EventEmitter } from 'node:events';
import { type AssignmentsReply, type Heartbeat, type HeartbeatReply, type Model, type NodeAdminState, type ShardAssignment } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { Decision, Replica, RolloutRecord } from '../domain.js';
import type { Inventory } from '../inventory.js';
import { placementModels, sourcesToEstimateOnce } from '../estimates.js';
import { reconcile, type ReconcileResult } from '../reconcile/reconcile.js';
import type { Store, StoredReplica } from '../store/store.js';
import { ephemeralEngineKeys, type EngineKeyOf } from './engine-keys.js';
import { allocatePort, applyActions, frozen, MASTER_PORTS, newReplicaIds, withSpec } from './apply.js';
import { AssignmentFeed } from './assignment-feed.js';
import { assignmentsFor } from './assignments.js';
import { applyHeartbeatShards } from './replica-status.js';
import { Downloads, failedDownloading } from './downloads.js';
import { PassSchedule } from './passes.js';
import { ReplicaWrites } from './replica-writes.js';
import { RolloutBook, type RolloutChange } from './rollout-book.js';
import type { CatalogView, ControllerEvents, ControllerOptions, LoadSnapshot, LoadSource, PlacementAttempt, ReportRefusal } from './options.js';
import { routeTable, type RouteTarget } from './routes.js';
import { EngineProbes } from './engine-probes.js';
import { quietTargets, serving, unheardNodes } from './serving.js';

export type { CatalogView, ControllerEvents, ControllerOptions, LoadSnapshot, LoadSource, PlacementAttempt, ReportRefusal, RouteTarget };

/** A pass planned and applied in memory, not yet committed (`Controller.planPass`). */
export interface AppliedPass {
  nowMs: number;
  plan: ReconcileResult;
  /** Ids of the replicas it created, changed or removed. */
  changed: string[];
  /** Its decisions, for the events once it stands. */
  decided: Decision[];
}

const NO_TRAFFIC: LoadSource = { loadSnapshot: () => ({ inFlight: new Map(), models: new Map() }) };

/**
 * Owns the state of the fleet (inventory, replicas, last placement attempts): takes a
 * snapshot, runs the pure reconciler over it and applies the plan. HTTP handlers, the
 * dashboard and the gateway read from here; nothing else changes replicas, and what
 * they read is frozen (a change replaces the replica, it never edits one in place).
 */
export class Controller {
  readonly events = new EventEmitter<ControllerEvents>();
  protected readonly replicas = new Map<string, Replica>();
  private readonly attempts = new Map<string, PlacementAttempt>();
  private readonly failuresByModel = new Map<string, number>();
  private routeCache?: Map<string, readonly RouteTarget[]>;
  private livenessKey = '';
  private lowSince = new Map<string, number>();
  /** Set while lost nodes' replicas are not replaced because too many went silent at once. */
  paused?: string;
  /** Model files coming to agents now, per shard; soft state, not persisted. */
  readonly downloads = new Downloads();
  /** Nodes whose last heartbeat was refused for its size: one event each until one is accepted. */
  private readonly refusing = new Set<string>();
  /** The end of each shard's log as its agent last sent it; soft state, not persisted. */
  private readonly logTails = new Map<string, string>();
  /** Replica records on their way to the store (see `persist`). */
  protected readonly writes: ReplicaWrites;
  private timer?: NodeJS.Timeout;
  /** When passes run: at once for most changes, at a bounded rate for a changed report. */
  private readonly passes: PassSchedule;
  private nextMasterPort: number = MASTER_PORTS.first;
  private readonly feed: AssignmentFeed;
  /** Revisions, rollout records and where each rollout stands (`ctl rollout`). */
  readonly rollouts: RolloutBook;
  /** The new revisions and rollout changes of the pass being planned, for its events. */
  private rolloutChanges: RolloutChange[] = [];
  readonly now: () => number;
  readonly startedAtMs: number;
  protected readonly engineKey: EngineKeyOf;
  /** The server's own probes of engines whose agent went quiet (`serving.ts`). */
  readonly probes: EngineProbes;

  constructor(
    readonly inventory: Inventory,
    protected readonly store: Store,
    protected catalog: CatalogView,
    protected readonly opts: ControllerOptions,
    protected readonly log: Logger,
    stored: readonly StoredReplica[] = [],
    rollouts: readonly RolloutRecord[] = [],
  ) {
    this.now = opts.now ?? Date.now;
    this.rollouts = new RolloutBook(store, log, rollouts);
    this.passes = new PassSchedule(() => this.reconcileNow(), opts.reportPassMs ?? 100);
    this.feed = new AssignmentFeed((id) => this.assignmentsFor(id), this.now());
    this.startedAtMs = this.now();
    this.events.setMaxListeners(0);
    // Any replica change invalidates the routing table; it is rebuilt on the next request.
    this.events.on('replicas', () => (this.routeCache = undefined));
    this.engineKey = opts.engineKey ?? ephemeralEngineKeys();
    this.writes = new ReplicaWrites(store, (id) => this.replicas.get(id), log);
    this.probes = new EngineProbes({
      intervalMs: Math.min(opts.engineProbeIntervalMs ?? 2000, inventory.policy.notReadyAfterMs / 4),
      targets: () => quietTargets(this.replicas.values(), this.inventory, this.now()),
      changed: () => this.events.emit('replicas'),
      now: this.now,
      ...(opts.probeEngine ? { probe: opts.probeEngine } : {}),
    });
    // Stored replicas have no key; what a store from before still held is replaced too,
    // so every key is the derived one (an engine started with an old key restarts once).
    for (const r of stored) this.replicas.set(r.id, frozen(withSpec({ ...r, apiKey: this.engineKey(r.id) }, catalog.models)));
    this.refreshAssignments();
  }

  /** A controller over the replicas the store holds. */
  static async load(inventory: Inventory, store: Store, catalog: CatalogView, opts: ControllerOptions, log: Logger): Promise<Controller> {
    return new Controller(inventory, store, catalog, opts, log, await store.loadReplicas(), await store.loadRollouts());
  }

  start(): void {
    this.timer = setInterval(() => this.passes.run(), this.opts.reconcileIntervalMs);
    this.timer.unref();
    this.probes.start();
    this.passes.run();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.probes.stop();
    this.passes.stop();
  }

  get models(): Model[] {
    return this.catalog.models;
  }

  get catalogView(): CatalogView {
    return this.catalog;
  }

  setCatalog(catalog: CatalogView): void {
    this.catalog = catalog;
    for (const r of this.replicas.values()) if (!r.spec) this.replicas.set(r.id, frozen(withSpec(r, catalog.models)));
    this.notify();
  }

  /** Every replica, oldest first. Frozen: a reader may keep them, never change them. */
  listReplicas(): Replica[] {
    return [...this.replicas.values()].sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
  }

  /** Ready replicas of a model that serve (`serving.ts`), for the gateway. Cached until replicas, liveness or probes change. */
  routes(model: string): readonly RouteTarget[] {
    if (!this.routeCache) {
      const nowMs = this.now();
      this.routeCache = routeTable(this.replicas.values(), (r) => serving(r, this.inventory, this.probes, nowMs).serves);
    }
    return this.routeCache.get(model) ?? [];
  }

  /** Whether a replica serves now, and for how long its silent agent has been so (`ctl replicas`). */
  serving(r: Replica): { serves: boolean; silentS?: number } {
    return serving(r, this.inventory, this.probes, this.now());
  }

  /** The nodes that make a live replica `unknown` in every surface (`unheardNodes`); none when it is what its state says. */
  unheard(r: Replica): string[] {
    return unheardNodes(r, this.inventory, this.probes, this.now());
  }

  /** A gateway request to the replica's engine failed: an engine vouched for by probes alone is ejected. */
  engineFailed(replicaId: string): void {
    this.probes.failed(replicaId);
  }

  logTail(shardId: string): string | undefined {
    return this.logTails.get(shardId);
  }

  lastAttempt(model: string): PlacementAttempt | undefined {
    return this.attempts.get(model);
  }

  /**
   * Asks for a reconcile soon. Several notifications in one tick of the event loop
   * collapse into one pass.
   */
  notify(): void {
    this.passes.soon();
  }

  async setNodeState(id: string, state: NodeAdminState, reason?: string, drain: { deadlineS?: number; force?: boolean } = {}): Promise<boolean> {
    const ok = await this.inventory.setAdmin(id, state, reason, new Date(this.now()), drain);
    if (ok) this.notify();
    return ok;
  }

  /**
   * Records a heartbeat. The reply only acknowledges it and names the GGUF sources the
   * server wants sized: assignments travel on the long-poll alone, so a reply computed
   * before the reconcile this heartbeat triggers can never hand out stale ones.
   */
  heartbeat(hb: Heartbeat): HeartbeatReply {
    const nodeId = hb.report.node_id;
    this.refusing.delete(nodeId);
    const nowMs = this.now();
    const estimate = sourcesToEstimateOnce(this.catalog.models);
    const reply = { node_id: nodeId, ...(estimate.length ? { estimate_sources: estimate } : {}) };
    // Older than what this instance holds (a later one came first, here or through the
    // database): it proves the node alive, and says nothing else that is still true.
    if (this.inventory.olderThanHeld(nodeId, hb.seq)) {
      this.inventory.seen(nodeId, nowMs);
      return reply;
    }
    const before = this.inventory.get(nodeId);
    const wasLive = before !== undefined && this.inventory.liveness(before, nowMs) === 'ready';
    const changed = this.inventory.report(hb.report, nowMs, hb.shards, hb.seq);
    const touched = this.applyShardStatus(nodeId, hb);
    const moved = this.downloads.report(nodeId, hb.shards, (id) => this.replicas.get(id), nowMs);
    if (moved.length) this.events.emit('downloads', moved);
    // A node that joins or comes back, or a shard that changed state, moves traffic and
    // placement now; a live node's new report only feeds the next plan (`notifyReport`).
    if (touched || (changed && !wasLive)) this.notify();
    else if (changed) this.passes.bounded();
    return reply;
  }

  /**
   * A heartbeat of the node refused for its size (api/agent.ts): the `reportRefused`
   * event when the node starts being refused, not at every beat, so a node that sends
   * one every few seconds cannot fill the event log.
   */
  refuseReport(nodeId: string, part: ReportRefusal['part'], bytes: number | undefined, limit: number): void {
    if (this.refusing.has(nodeId)) return;
    this.refusing.add(nodeId);
    this.events.emit('reportRefused', { nodeId, part, ...(bytes !== undefined ? { bytes } : {}), limit });
  }

  /** The node's assignments now, with their version. */
  assignments(nodeId: string): AssignmentsReply {
    return this.feed.reply(nodeId);
  }

  /**
   * Resolves with the node's assignments once their version differs from `after`, or at
   * the timeout. An agent that just started asks with a version no server hands out, so
   * it gets the current assignments at once.
   */
  waitForAssignments(nodeId: string, after: number, timeoutMs: number, signal?: AbortSignal): Promise<AssignmentsReply> {
    return this.feed.wait(nodeId, after, timeoutMs, signal);
  }

  protected applyShardStatus(nodeId: string, hb: Heartbeat, write = true): boolean {
    const changed: string[] = [];
    const addrOf = (id: string) => this.inventory.get(id)?.report?.mgmt_addr;
    for (const { before, after } of applyHeartbeatShards(this.replicas, nodeId, hb, this.now(), addrOf, (id, tail) => this.logTails.set(id, tail))) {
      const id = after.id;
      this.replicas.set(id, frozen(after));
      changed.push(id);
      if (before.state !== after.state) {
        this.log.info({ replica: id, model: after.model, from: before.state, to: after.state, error: after.error }, 'replica state changed');
        if (after.state === 'failed') this.failuresByModel.set(after.model, (this.failuresByModel.get(after.model) ?? 0) + 1);
        // A file that could not be fetched or checked is the `download-failed` the downloads record, not the engine's failure.
        if (after.state === 'failed' && !failedDownloading(after, hb.shards))
          this.events.emit('decided', [{ kind: 'report', code: 'engine-failed', reason: after.error ?? 'its engine failed', replica: after }]);
        this.events.emit('replicas');
      } else if (before.endpoint !== after.endpoint) {
        // An engine restarted on another port while staying ready: the routing table must follow.
        this.events.emit('replicas');
      }
    }
    if (write) void this.persist(changed);
    return changed.length > 0;
  }

  /**
   * One reconcile pass: plan and apply in memory (`planPass`), queue the replicas it
   * changed for the store, then its events and the agents' new assignments (`settlePass`).
   * A shared store commits between the two halves instead (SharedController).
   */
  reconcileNow(): void {
    const pass = this.planPass(this.now());
    void this.persist(pass.changed);
    void this.inventory.persistReports();
    this.settlePass(pass);
  }

  /** The first half of a pass, the same for one server and several: snapshot, plan, and apply the plan in memory. */
  protected planPass(nowMs: number): AppliedPass {
    const plan = this.plan(nowMs);
    return { nowMs, plan, ...this.apply(plan, nowMs) };
  }

  /** The second half, once the pass is committed: its events, traffic following the fleet, and the agents' assignments. */
  protected settlePass(pass: AppliedPass): void {
    this.emitDecided(pass.decided);
    this.followLiveness(pass.nowMs, pass.plan.actions.length > 0);
    this.refreshAssignments();
  }

  private plan(nowMs: number): ReconcileResult {
    const nodes = this.inventory.list();
    const liveReports = nodes.filter((n) => this.inventory.liveness(n, nowMs) === 'ready').map((n) => n.report);
    const { models, defer } = placementModels(
      this.catalog.models,
      nodes.map((n) => n.report),
      liveReports,
      this.opts.estimates,
    );
    const load = (this.opts.load ?? NO_TRAFFIC).loadSnapshot();
    this.rolloutChanges = this.rollouts.observe(this.catalog.models, nowMs);
    return reconcile({
      models,
      defer,
      nodes: this.inventory.snapshot(nowMs),
      replicas: this.listReplicas(),
      nowMs,
      policy: {
        failedBackoffMs: this.opts.failedBackoffMs,
        drainParallel: this.opts.drainParallel,
        minHealthyMs: this.opts.minHealthyMs,
        drainTimeoutMs: this.opts.drainTimeoutMs,
        maxLostFraction: this.opts.maxLostFraction,
      },
      inFlight: load.inFlight,
      load: load.models,
      failures: new Map(this.failuresByModel),
      lowSince: this.lowSince,
      revisions: this.rollouts.revisions(this.catalog.models),
      rollouts: this.rollouts.all(),
    });
  }

  /** Liveness moves with the clock, not with events; a change must reroute traffic. */
  protected followLiveness(nowMs: number, planned: boolean): void {
    const livenessKey = this.inventory
      .list()
      .map((n) => this.inventory.liveness(n, nowMs))
      .join();
    if (planned || livenessKey !== this.livenessKey) {
      this.livenessKey = livenessKey;
      this.events.emit('replicas');
    }
  }

  /** The events of a plan once it stands: its decisions, and the rollouts it moved. */
  private emitDecided(decided: Decision[]): void {
    if (decided.length) this.events.emit('decided', decided);
    if (this.rolloutChanges.length) this.events.emit('rollouts', this.rolloutChanges);
    this.rolloutChanges = [];
  }

  /**
   * Carries out a plan in memory: ids, keys and rendezvous ports are allocated here, not
   * in planning. Returns the ids of the replicas it changed (to be written) and the
   * decisions, for the events once the plan stands.
   */
  private apply(plan: ReconcileResult, nowMs: number): Pick<AppliedPass, 'changed' | 'decided'> {
    this.lowSince = plan.lowSince;
    if (plan.paused !== this.paused) {
      if (plan.paused) this.log.warn(plan.paused);
      else if (this.paused) this.log.info('replacement of lost nodes resumed');
      this.paused = plan.paused;
    }
    for (const [model, outcome] of plan.attempts) this.attempts.set(model, { outcome, atMs: nowMs });
    this.rolloutChanges.push(...this.rollouts.afterPass(plan.rollouts, plan.halts, nowMs));
    const { changed, removed, decided } = applyActions(
      plan.actions,
      this.replicas,
      (p) => newReplicaIds(this.engineKey, p.shards.length > 1 ? this.allocateMasterPort() : undefined),
      this.log,
    );
    for (const s of removed.flatMap((r) => r.shards)) this.logTails.delete(s.id);
    return { changed, decided };
  }

  /** Writes the changed replicas, with any the store refused before (see `ReplicaWrites`). Never rejects. */
  persist(changed: readonly string[] = []): Promise<boolean> {
    return this.writes.persist(changed);
  }

  /** The next free rendezvous port (see `allocatePort`). */
  private allocateMasterPort(): number {
    const { port, next } = allocatePort(this.replicas.values(), this.nextMasterPort);
    this.nextMasterPort = next;
    return port;
  }

  /** Shards the node should run, from the specs frozen on its replicas (`replicas`: a list already taken this pass). */
  assignmentsFor(nodeId: string, replicas: readonly Replica[] = this.listReplicas()): ShardAssignment[] {
    return assignmentsFor(nodeId, replicas, (id) => this.inventory.get(id)?.report?.mgmt_addr);
  }

  protected refreshAssignments(): void {
    // One sorted list for every node, not one per node.
    const replicas = this.listReplicas();
    this.feed.refresh(
      this.inventory.list().map((n) => n.id),
      (id) => this.assignmentsFor(id, replicas),
    );
  }
}
