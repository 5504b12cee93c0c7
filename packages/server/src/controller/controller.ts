import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Heartbeat, HeartbeatReply, Model, NodeAdminState, ShardAssignment } from '@llmgw/shared';
import type { Logger } from 'pino';
import { HOLDS_RESOURCES, type Replica, type Shard } from '../domain.js';
import type { Inventory } from '../inventory.js';
import { estimatesFrom, modelsAwaitingEstimates, pendingSources, sourcesToEstimate, withEstimates } from '../estimates.js';
import { reconcile, type ModelLoad } from '../reconcile/reconcile.js';
import type { PlacementOutcome } from '../snapshot.js';
import type { Store } from '../store/store.js';

/** The part of the loaded catalog the controller needs. */
export interface CatalogView {
  models: Model[];
  resolve(nameOrAlias: string): Model | undefined;
  suggest(name: string): string[];
}

/** A ready replica the gateway may send a model's requests to. */
export interface RouteTarget {
  replicaId: string;
  endpoint: string;
  apiKey: string;
}

export interface PlacementAttempt {
  outcome: PlacementOutcome;
  atMs: number;
}

/** Where the controller learns about traffic: the gateway. */
export interface LoadSource {
  inFlight(replicaId: string): number;
  load(model: string): ModelLoad;
}

export interface ControllerOptions {
  reconcileIntervalMs: number;
  drainParallel: number;
  minHealthyMs: number;
  drainTimeoutMs: number;
  maxLostFraction: number;
  /** First backoff of a failed replica before it is replaced; doubles per failure of the model. */
  failedBackoffMs: number;
  now?: () => number;
}

/**
 * Owns the state of the fleet (inventory, replicas, last placement attempts) and runs
 * the pure reconciler over it. HTTP handlers and the dashboard read from here; nothing
 * else mutates replicas.
 */
export class Controller {
  readonly events = new EventEmitter();
  private readonly replicas = new Map<string, Replica>();
  private readonly attempts = new Map<string, PlacementAttempt>();
  private readonly assignmentJson = new Map<string, string>();
  private readonly versions = new Map<string, number>();
  private readonly failuresByModel = new Map<string, number>();
  private routeTable?: Map<string, RouteTarget[]>;
  private livenessKey = '';
  private lowSince = new Map<string, number>();
  private loadSource: LoadSource = { inFlight: () => 0, load: () => ({ inFlight: 0, waiting: 0 }) };
  /** Set while lost nodes' replicas are not replaced because too many went silent at once. */
  paused?: string;
  /** The end of each shard's log as its agent last sent it; soft state, not persisted. */
  private readonly logTails = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private pending = false;
  private nextMasterPort = 29500;
  /** Versions start at the boot time so an agent's version from before a restart never matches by chance. */
  private readonly versionBase: number;
  readonly now: () => number;
  readonly startedAtMs: number;

  constructor(
    readonly inventory: Inventory,
    private readonly store: Store,
    private catalog: CatalogView,
    private readonly opts: ControllerOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
    this.versionBase = this.now();
    this.startedAtMs = this.now();
    this.events.setMaxListeners(0);
    // Any replica change invalidates the routing table; it is rebuilt on the next request.
    this.events.on('replicas', () => (this.routeTable = undefined));
    for (const r of store.loadReplicas()) this.replicas.set(r.id, r);
    this.refreshAssignments();
  }

  start(): void {
    this.timer = setInterval(() => this.reconcileNow(), this.opts.reconcileIntervalMs);
    this.timer.unref();
    this.reconcileNow();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  setLoadSource(src: LoadSource): void {
    this.loadSource = src;
  }

  get models(): Model[] {
    return this.catalog.models;
  }

  get catalogView(): CatalogView {
    return this.catalog;
  }

  setCatalog(catalog: CatalogView): void {
    this.catalog = catalog;
    this.notify();
  }

  listReplicas(): Replica[] {
    return [...this.replicas.values()].sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
  }

  /** Ready replicas of a model, for the gateway. Cached until replicas change. */
  routes(model: string): RouteTarget[] {
    if (!this.routeTable) {
      const table = new Map<string, RouteTarget[]>();
      const nowMs = this.now();
      for (const r of this.replicas.values()) {
        if (r.state !== 'ready' || !r.endpoint) continue;
        // A node that stopped reporting gets no traffic: its engines may be gone.
        if (r.shards.some((s) => { const n = this.inventory.get(s.nodeId); return !n || this.inventory.liveness(n, nowMs) !== 'ready'; })) continue;
        const list = table.get(r.model) ?? [];
        list.push({ replicaId: r.id, endpoint: r.endpoint, apiKey: r.apiKey });
        table.set(r.model, list);
      }
      this.routeTable = table;
    }
    return this.routeTable.get(model) ?? [];
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
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      this.reconcileNow();
    });
  }

  setNodeState(id: string, state: NodeAdminState, reason?: string, drain: { deadlineS?: number; force?: boolean } = {}): boolean {
    const ok = this.inventory.setAdmin(id, state, reason, new Date(this.now()), drain);
    if (ok) this.notify();
    return ok;
  }

  /** Records a heartbeat and answers with the node's assignments. */
  heartbeat(hb: Heartbeat): HeartbeatReply {
    const nodeId = hb.report.node_id;
    const changed = this.inventory.report(hb.report, this.now());
    const touched = this.applyShardStatus(nodeId, hb);
    if (changed || touched) this.notify();
    return this.reply(nodeId);
  }

  reply(nodeId: string): HeartbeatReply {
    const estimate = sourcesToEstimate(this.catalog.models);
    return {
      node_id: nodeId,
      version: this.versions.get(nodeId) ?? this.versionBase,
      assignments: this.assignmentsFor(nodeId),
      ...(estimate.length ? { estimate_sources: estimate } : {}),
    };
  }

  /** Resolves with the node's assignments once their version passes `after`, or at the timeout. */
  waitForAssignments(nodeId: string, after: number, timeoutMs: number, signal?: AbortSignal): Promise<HeartbeatReply> {
    if ((this.versions.get(nodeId) ?? this.versionBase) !== after) return Promise.resolve(this.reply(nodeId));
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.events.off(`assignments:${nodeId}`, done);
        signal?.removeEventListener('abort', done);
        resolve(this.reply(nodeId));
      };
      const timer = setTimeout(done, timeoutMs);
      this.events.on(`assignments:${nodeId}`, done);
      signal?.addEventListener('abort', done);
    });
  }

  private applyShardStatus(nodeId: string, hb: Heartbeat): boolean {
    let touched = false;
    const mgmt = hb.report.mgmt_addr;
    for (const st of hb.shards) {
      const replica = this.replicas.get(st.replica_id);
      const shard = replica?.shards.find((s) => s.id === st.id && s.nodeId === nodeId);
      if (!replica || !shard) continue;
      if (st.log_tail !== undefined) this.logTails.set(shard.id, st.log_tail);
      const next: Partial<Shard> = {
        state: st.state === 'stopped' ? shard.state : st.state,
        ...(st.port !== undefined ? { port: st.port } : {}),
        ...(st.pid !== undefined ? { pid: st.pid } : {}),
        ...(st.restarts !== undefined ? { restarts: st.restarts } : {}),
      };
      const error = st.error;
      if (
        next.state !== shard.state ||
        next.port !== shard.port ||
        next.pid !== shard.pid ||
        error !== shard.error ||
        next.restarts !== shard.restarts
      ) {
        Object.assign(shard, next);
        if (error) shard.error = error;
        else delete shard.error;
        this.updateReplicaState(replica, mgmt);
        this.store.saveReplica(replica);
        touched = true;
      }
    }
    return touched;
  }

  private updateReplicaState(r: Replica, mgmtAddr: string): void {
    if (r.state === 'draining' || r.state === 'stopped') return;
    const states = r.shards.map((s) => s.state);
    const before = r.state;
    const endpointBefore = r.endpoint;
    if (states.includes('failed')) {
      r.state = 'failed';
      const bad = r.shards.find((s) => s.state === 'failed');
      r.error = `shard ${bad?.rank} on ${bad?.nodeId}: ${bad?.error ?? 'failed'}`;
    } else if (states.every((s) => s === 'ready')) {
      if (r.state !== 'ready') r.readySinceMs = this.now();
      r.state = 'ready';
      delete r.error;
    } else if (states.some((s) => s === 'starting' || s === 'ready')) {
      r.state = 'starting';
    }
    const head = r.shards.find((s) => s.rank === 0);
    if (r.state === 'ready' && head?.port) {
      const addr = this.inventory.get(head.nodeId)?.report?.mgmt_addr ?? mgmtAddr;
      r.endpoint = `http://${hostForUrl(addr)}:${head.port}`;
    }
    if (before !== r.state) {
      this.log.info({ replica: r.id, model: r.model, from: before, to: r.state, error: r.error }, 'replica state changed');
      if (r.state === 'failed') this.failuresByModel.set(r.model, (this.failuresByModel.get(r.model) ?? 0) + 1);
      this.events.emit('replicas');
    } else if (endpointBefore !== r.endpoint) {
      // An engine restarted on another port while staying ready: the routing table must follow.
      this.events.emit('replicas');
    }
  }

  /** One reconcile pass: decide, apply, persist, and hand agents their new assignments. */
  reconcileNow(): void {
    const nowMs = this.now();
    const nodes = this.inventory.list();
    const liveReports = nodes.filter((n) => this.inventory.liveness(n, nowMs) === 'ready').map((n) => n.report);
    const defer = modelsAwaitingEstimates(this.catalog.models, pendingSources(sourcesToEstimate(this.catalog.models), liveReports));
    const result = reconcile({
      models: withEstimates(this.catalog.models, estimatesFrom(nodes.map((n) => n.report))),
      defer,
      nodes: this.inventory.snapshot(nowMs),
      replicas: this.listReplicas(),
      nowMs,
      policy: {
        failedBackoffMs: (r) => {
          const n = Math.max(0, (this.failuresByModel.get(r.model) ?? 1) - 1);
          return Math.min(this.opts.failedBackoffMs * 2 ** n, 10 * 60_000);
        },
        drainParallel: this.opts.drainParallel,
        minHealthyMs: this.opts.minHealthyMs,
        drainTimeoutMs: this.opts.drainTimeoutMs,
        maxLostFraction: this.opts.maxLostFraction,
      },
      inFlight: (id) => this.loadSource.inFlight(id),
      load: (m) => this.loadSource.load(m),
      lowSince: this.lowSince,
      newReplica: () => ({
        id: `r-${randomUUID().slice(0, 8)}`,
        apiKey: `sk-llmgw-engine-${randomBytes(18).toString('base64url')}`,
        masterPort: this.allocateMasterPort(),
      }),
    });
    this.lowSince = result.lowSince;
    if (result.paused !== this.paused) {
      if (result.paused) this.log.warn(result.paused);
      else if (this.paused) this.log.info('replacement of lost nodes resumed');
      this.paused = result.paused;
    }
    for (const [model, outcome] of result.attempts) this.attempts.set(model, { outcome, atMs: nowMs });
    for (const { id, reason } of result.remove) {
      const r = this.replicas.get(id);
      this.replicas.delete(id);
      this.store.deleteReplica(id);
      for (const s of r?.shards ?? []) this.logTails.delete(s.id);
      this.log.info({ replica: id, model: r?.model, reason }, 'replica removed');
    }
    for (const u of result.update) {
      const before = this.replicas.get(u.id);
      this.replicas.set(u.id, u);
      this.store.saveReplica(u);
      if (before?.state !== u.state) this.log.info({ replica: u.id, model: u.model, from: before?.state, to: u.state, reason: u.drainReason }, 'replica state changed');
      else if (u.drainBlocked && before?.drainBlocked !== u.drainBlocked) this.log.warn({ replica: u.id, model: u.model }, `drain blocked: ${u.drainBlocked}`);
    }
    for (const r of result.create) {
      this.replicas.set(r.id, r);
      this.store.saveReplica(r);
      this.log.info({ replica: r.id, model: r.model, profile: r.profile, nodes: r.shards.map((s) => s.nodeId) }, 'replica placed');
    }
    // Liveness moves with the clock, not with events; a change must reroute traffic.
    const livenessKey = this.inventory.list().map((n) => this.inventory.liveness(n, nowMs)).join();
    if (result.remove.length || result.create.length || result.update.length || livenessKey !== this.livenessKey) {
      this.livenessKey = livenessKey;
      this.events.emit('replicas');
    }
    this.refreshAssignments();
  }

  /**
   * The next rendezvous port, skipping those that replicas still holding resources use
   * (the counter restarts with the server, and wraps), so two replicas never share one.
   */
  private allocateMasterPort(): number {
    const inUse = new Set<number>();
    for (const r of this.replicas.values()) if (r.masterPort !== undefined && HOLDS_RESOURCES.has(r.state)) inUse.add(r.masterPort);
    let port = this.nextMasterPort;
    for (let i = 0; i < 500 && inUse.has(port); i++) port = port >= 29999 ? 29500 : port + 1;
    this.nextMasterPort = port >= 29999 ? 29500 : port + 1;
    return port;
  }

  /** Shards the node should run, built from the replicas that hold resources there. */
  assignmentsFor(nodeId: string): ShardAssignment[] {
    const out: ShardAssignment[] = [];
    for (const r of this.listReplicas()) {
      // A draining replica keeps running (it finishes its requests); failed and stopped ones do not.
      if (r.state === 'stopped' || r.state === 'failed') continue;
      const model = this.catalog.models.find((m) => m.name === r.model);
      const profile = model?.profiles.find((p) => p.name === r.profile);
      if (!model || !profile) continue;
      const head = r.shards.find((s) => s.rank === 0);
      const headAddr = head ? this.inventory.get(head.nodeId)?.report?.mgmt_addr : undefined;
      for (const s of r.shards) {
        if (s.nodeId !== nodeId) continue;
        out.push({
          id: s.id,
          replica_id: r.id,
          model: model.name,
          profile: profile.name,
          engine: profile.engine,
          source: profile.source ?? model.source,
          rank: s.rank,
          shards: r.shards.length,
          gpus: s.gpuUuids,
          gpu_indices: s.gpuIndices,
          args: profile.args ?? [],
          env: profile.env ?? {},
          ...(profile.command ? { command: profile.command } : {}),
          ...(r.shards.length > 1 && headAddr ? { master_addr: headAddr } : {}),
          ...(r.shards.length > 1 && r.masterPort ? { master_port: r.masterPort } : {}),
          api_key: r.apiKey,
          ...(profile.startup_timeout_s ? { startup_timeout_s: profile.startup_timeout_s } : {}),
        });
      }
    }
    return out;
  }

  private refreshAssignments(): void {
    for (const node of this.inventory.list()) {
      const json = JSON.stringify(this.assignmentsFor(node.id));
      if (this.assignmentJson.get(node.id) === json) continue;
      this.assignmentJson.set(node.id, json);
      this.versions.set(node.id, (this.versions.get(node.id) ?? this.versionBase) + 1);
      this.events.emit(`assignments:${node.id}`);
    }
  }
}

function hostForUrl(addr: string): string {
  return addr.includes(':') && !addr.startsWith('[') ? `[${addr}]` : addr;
}
