import type { Liveness, NodeAdminState, NodeReport, ShardStatus } from '@llmgw/shared';
import type { AdminState } from './domain.js';
import { DomainError, echo } from './errors.js';
import { identityOf, sameJson } from './report-values.js';
import { nodeSnapshot, type NodeSnapshot } from './snapshot.js';
import { serialWrites } from './store/serial.js';
import type { Store, StoredNode } from './store/store.js';

export interface LivenessPolicy {
  /** Milliseconds without a heartbeat before a node is `not-ready` (no traffic, no placement). */
  notReadyAfterMs: number;
  /** Milliseconds without a heartbeat before a node is `lost` (its replicas are replaced). */
  lostAfterMs: number;
}

export interface InventoryNode {
  id: string;
  admin: AdminState;
  report?: NodeReport;
  /** For a node known only from the store, the server's start: it gets a full grace to report. */
  lastSeenMs: number;
  /** False until the node's first heartbeat since the server started. */
  reported: boolean;
  /** The shard statuses of its last heartbeat, written with the report on a shared store. */
  shards?: ShardStatus[];
  /** Its last heartbeat reached another instance; this one heard of it through the database. */
  remote?: boolean;
  /**
   * Its credential was heard from two places at once (credentials/sightings.ts): why,
   * and until when it shows as suspect in `ctl nodes`. In memory, this instance's view.
   */
  suspect?: { reason: string; untilMs: number };
  /**
   * The `seq` of the heartbeat `report` and `shards` are from: nothing with a lower one
   * replaces them (`olderThanHeld`). Absent until a heartbeat that carries one, and for a
   * node only remembered from the store: a restart holds no version of its own.
   */
  seq?: number;
  /** On a shared store, the database's clock at this instance's last write of its report. */
  writtenDbMs?: number;
}

export interface InventoryOptions {
  /**
   * The store is shared with other server instances (PostgreSQL): every heartbeat is
   * written, report and shard statuses, not only a changed report, because the others
   * judge liveness by the database's view and derive replica states from it.
   */
  shared?: boolean;
  /**
   * How long a report to be written waits for others to share its transaction (default
   * 250 ms): one write per batch, not one per heartbeat.
   */
  batchMs?: number;
}

/**
 * The fleet as agents report it, plus the operators' admin states. Reports live in
 * memory (and the last one in the store, so `ctl nodes` still lists a node after a
 * server restart); admin states are written through to the store.
 *
 * Reports are written in batches (`InventoryOptions.batchMs`), not one write per heartbeat.
 *
 * When the store refuses a write: an admin state change is refused (the error, a 503,
 * goes back to the operator) and memory keeps the old state; a report is kept in memory
 * (agents keep reporting and nodes stay live while the disk is full) and written again
 * by `persistReports` until the store takes it.
 */
export class Inventory {
  private readonly nodes = new Map<string, InventoryNode>();
  /** `list()`'s order, kept until a node comes or goes: a pass lists the fleet several times. */
  private sorted?: InventoryNode[];
  /** Nodes whose last report the store has not taken yet, and the reports the batch in flight writes. */
  private readonly unsaved = new Set<string>();
  private readonly writing = new Map<string, NodeReport>();
  private batchTimer?: NodeJS.Timeout;
  /**
   * On a shared store, when this instance last heard from the database (its last
   * successful pull, cluster/sync.ts, told through `heardFromDatabase`). A node whose
   * heartbeats reach another instance ages only up to then: while the database is down
   * this instance cannot know, and its gateway keeps routing to what was ready rather
   * than to nothing.
   */
  private heardAtMs?: number;

  constructor(
    private readonly store: Store,
    readonly policy: LivenessPolicy,
    bootMs: number = Date.now(),
    stored: readonly StoredNode[] = [],
    private readonly opts: InventoryOptions = {},
  ) {
    for (const n of stored) {
      // A node remembered from before a restart gets no traffic until its agent speaks
      // again, and is lost only if it stays silent a whole grace counted from the boot:
      // a restarted server must not replace every replica in the fleet.
      this.nodes.set(n.id, { id: n.id, admin: n.admin, ...(n.report ? { report: n.report } : {}), lastSeenMs: bootMs, reported: false });
    }
  }

  /** The nodes the store remembers, each given a full grace from `bootMs` to report. */
  static async load(store: Store, policy: LivenessPolicy, bootMs: number = Date.now(), opts: InventoryOptions = {}): Promise<Inventory> {
    return new Inventory(store, policy, bootMs, await store.loadNodes(), opts);
  }

  /**
   * Whether a heartbeat of version `seq` is older than what this instance holds of the
   * node: it reached this instance after a later one reached it, directly or through the
   * database (an agent that failed over while a request was still on its way).
   */
  olderThanHeld(nodeId: string, seq: number | undefined): boolean {
    const held = this.nodes.get(nodeId)?.seq;
    return seq !== undefined && held !== undefined && seq < held;
  }

  /**
   * A heartbeat that is older than what is held (`olderThanHeld`) still proves the node
   * alive now; its report and shard statuses are not taken.
   */
  seen(nodeId: string, nowMs: number): void {
    const node = this.nodes.get(nodeId);
    if (!node || nowMs <= node.lastSeenMs) return;
    node.lastSeenMs = nowMs;
    node.reported = true;
    node.remote = false;
  }

  /** Records a heartbeat. Returns true when the report differs from the last one, or the node was not live. */
  report(report: NodeReport, nowMs: number, shards?: ShardStatus[], seq?: number): boolean {
    const existing = this.nodes.get(report.node_id);
    const node: InventoryNode = existing ?? { id: report.node_id, admin: { state: 'ready' }, lastSeenMs: 0, reported: false };
    const wasLive = existing ? this.liveness(existing, nowMs) === 'ready' : false;
    // A node waiting for approval may be anyone holding the join token: until an operator
    // approves it, only who it says it is is kept (issue 27), not what it says it has.
    const pending = node.admin.state === 'pending-approval';
    const kept = pending ? identityOf(report) : report;
    // Compared with the last one as values, with nothing built for it: this runs per heartbeat.
    const changed = !sameJson(node.report, kept);
    node.report = kept;
    node.lastSeenMs = nowMs;
    node.reported = true;
    node.remote = false;
    if (shards) node.shards = pending ? [] : shards;
    if (seq !== undefined) node.seq = seq;
    else delete node.seq;
    if (!existing) this.added(node);
    // SQLite keeps a node's last report for `ctl nodes` after a restart: a repeat adds
    // nothing. Either store takes the batch in one transaction (`persistReports`), which
    // also retries, at the next batch or pass, what a degraded store refused.
    if (this.opts.shared || changed) {
      this.unsaved.add(node.id);
      this.batchTimer ??= setTimeout(() => {
        this.batchTimer = undefined;
        void this.persistReports();
      }, this.opts.batchMs ?? 250);
    }
    return changed || !wasLive;
  }

  /**
   * A node as another instance wrote it to the shared store: its admin state; its report
   * when the row's heartbeat is a later one than this instance holds; and its liveness
   * when the database saw that heartbeat after the last one heard here (`seenAtMs`, on
   * this clock). `changed`: something routing or placement reads changed; `newer`: the
   * row's heartbeat is later than any this instance had, so its shard statuses count.
   *
   * Later is by `seq` where both carry one, which no clock, batching or pull order can
   * turn around: a pulled row may be older than a heartbeat that reached this instance
   * since, or be this instance's own write of an earlier heartbeat coming back. Without
   * one (older agents), by when the database saw it, except for this instance's own
   * write (`ownWrite`): that row bears the write's time, later than the heartbeat in it,
   * and one heard here meanwhile gave way to it, for the next batch to write it back
   * (issue 32: 11 of 200 nodes' last accepted reports lost in the cluster bench).
   */
  applyRemote(row: StoredNode, seenAtMs: number | undefined): { changed: boolean; newer: boolean } {
    const node = this.nodes.get(row.id);
    if (!node) {
      this.added({
        id: row.id,
        admin: row.admin,
        ...(row.report ? { report: row.report } : {}),
        ...(row.shards ? { shards: row.shards } : {}),
        ...(row.seq !== undefined ? { seq: row.seq } : {}),
        lastSeenMs: seenAtMs ?? 0,
        reported: seenAtMs !== undefined && row.report !== undefined,
        remote: true,
      });
      return { changed: true, newer: seenAtMs !== undefined };
    }
    let changed = !sameJson(node.admin, row.admin);
    node.admin = row.admin;
    const fresher = row.report !== undefined && seenAtMs !== undefined && seenAtMs > node.lastSeenMs && !this.ownWrite(node, row);
    const newer = row.report !== undefined && (row.seq !== undefined ? node.seq === undefined || row.seq > node.seq : node.seq === undefined && fresher);
    if (newer && row.report) {
      if (!sameJson(node.report, row.report)) changed = true;
      node.report = row.report;
      if (row.shards) node.shards = row.shards;
      if (row.seq !== undefined) node.seq = row.seq;
    }
    if (fresher && seenAtMs !== undefined) {
      if (!node.reported) changed = true;
      node.lastSeenMs = seenAtMs;
      node.reported = true;
      node.remote = true;
    }
    return { changed, newer };
  }

  /**
   * A row without `seq` this instance wrote, or wrote over since: no later than its last
   * write of the node, or the very report the batch in flight is writing.
   */
  private ownWrite(node: InventoryNode, row: StoredNode): boolean {
    if (row.seq !== undefined) return false;
    if (row.lastSeenMs !== undefined && node.writtenDbMs !== undefined && row.lastSeenMs <= node.writtenDbMs) return true;
    const writing = this.writing.get(row.id);
    return writing !== undefined && sameJson(writing, row.report);
  }

  /** Forgets nodes another instance deleted: those the store no longer has. */
  keepOnly(ids: ReadonlySet<string>): string[] {
    const gone = [...this.nodes.keys()].filter((id) => !ids.has(id));
    for (const id of gone) {
      this.nodes.delete(id);
      this.unsaved.delete(id);
    }
    if (gone.length) this.sorted = undefined;
    return gone;
  }

  /** Stops the batch timer; `persistReports` writes what is left. */
  stop(): void {
    if (this.batchTimer) clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
  }

  /**
   * Writes the reports the store has not taken yet, in one transaction; on failure they
   * stay pending for the next call (each heartbeat and reconcile pass). Never rejects;
   * resolves whether nothing is pending any more.
   */
  readonly persistReports = serialWrites(
    () => this.unsaved.size > 0,
    async () => {
      const ids = [...this.unsaved];
      this.unsaved.clear();
      const rows = ids.flatMap((id) => {
        const n = this.nodes.get(id);
        return n?.report
          ? [{ id, report: n.report, lastSeenMs: n.lastSeenMs, ...(n.shards ? { shards: n.shards } : {}), ...(n.seq !== undefined ? { seq: n.seq } : {}) }]
          : [];
      });
      for (const r of rows) this.writing.set(r.id, r.report);
      try {
        const atMs = await this.store.saveNodeReports(rows);
        for (const r of rows) {
          const n = this.nodes.get(r.id);
          if (n && typeof atMs === 'number') n.writtenDbMs = atMs;
        }
        return true;
      } catch {
        // The store logs and counts its failures; the reports stay in memory until it recovers.
        for (const id of ids) if (this.nodes.has(id)) this.unsaved.add(id);
        return false;
      } finally {
        this.writing.clear();
      }
    },
  );

  get(id: string): InventoryNode | undefined {
    return this.nodes.get(id);
  }

  list(): InventoryNode[] {
    this.sorted ??= [...this.nodes.values()].sort((a, b) => a.id.localeCompare(b.id));
    return [...this.sorted];
  }

  private added(node: InventoryNode): void {
    this.nodes.set(node.id, node);
    this.sorted = undefined;
  }

  /**
   * A node that has just joined, before its first heartbeat: listed at once (as
   * `pending-approval` under manual approval). A node already known keeps its state.
   */
  async add(id: string, admin: AdminState, nowMs: number): Promise<void> {
    if (this.nodes.has(id)) return;
    await this.store.saveNodeAdmin(id, admin);
    this.added({ id, admin, lastSeenMs: nowMs, reported: false });
  }

  /** Forgets a node (`ctl nodes delete`): the store first, so a refused write changes nothing. */
  async remove(id: string): Promise<boolean> {
    // A batch of reports in flight may hold this node's: it lands first, or its upsert
    // (SQLite writes a large batch in chunks, yielding between them) would bring the
    // deleted row back. The node's pending report is dropped so no later batch takes it.
    this.unsaved.delete(id);
    await this.persistReports();
    await this.store.deleteNode(id);
    this.unsaved.delete(id);
    this.sorted = undefined;
    return this.nodes.delete(id);
  }

  /** Ends a node's wait for approval (`ctl nodes approve`): it becomes ready. */
  async approve(id: string, now: Date): Promise<void> {
    const node = this.nodes.get(id);
    if (!node) throw new DomainError('not_found', `no node "${echo(id)}" (see ctl nodes)`);
    if (node.admin.state !== 'pending-approval') throw new DomainError('conflict', `node ${id} is not waiting for approval (it is ${node.admin.state})`);
    const admin: AdminState = { state: 'ready', reason: 'approved', changedAt: now.toISOString() };
    await this.store.saveNodeAdmin(id, admin);
    node.admin = admin;
  }

  /** Sets a node's admin state. Returns false for an unknown node. */
  async setAdmin(
    id: string,
    state: NodeAdminState,
    reason: string | undefined,
    now: Date,
    drain: { deadlineS?: number; force?: boolean } = {},
  ): Promise<boolean> {
    const node = this.nodes.get(id);
    if (!node) return false;
    // Only approval ends the wait: an uncordon must not let an unapproved node in.
    if (node.admin.state === 'pending-approval') {
      throw new DomainError(
        'conflict',
        `node ${id} is waiting for approval: approve it with ctl nodes approve ${id}, or remove it with ctl nodes delete ${id}`,
      );
    }
    // The same state again (a second `ctl cordon`, a `ctl drain` to watch one under way)
    // keeps what was said and decided before unless it is said anew: a reason, a drain's
    // deadline and force, and when the state began.
    const same = node.admin.state === state ? node.admin : undefined;
    const kept = reason ?? same?.reason;
    const deadline = drain.deadlineS !== undefined ? new Date(now.getTime() + drain.deadlineS * 1000).toISOString() : same?.drainDeadline;
    const admin: AdminState = {
      state,
      ...(kept ? { reason: kept } : {}),
      changedAt: same?.changedAt ?? now.toISOString(),
      ...(state === 'draining' && deadline ? { drainDeadline: deadline } : {}),
      ...(state === 'draining' && (drain.force || same?.force) ? { force: true } : {}),
    };
    // Stored first: a state the store refused is neither acknowledged nor acted on.
    await this.store.saveNodeAdmin(id, admin);
    node.admin = admin;
    return true;
  }

  /** This instance read the other instances' heartbeats from the database at `atMs` (cluster/sync.ts). */
  heardFromDatabase(atMs: number): void {
    this.heardAtMs = atMs;
  }

  /** Marks a node suspect until `untilMs` (a later mark extends it). */
  markSuspect(id: string, reason: string, untilMs: number): void {
    const node = this.nodes.get(id);
    if (node) node.suspect = { reason, untilMs: Math.max(untilMs, node.suspect?.untilMs ?? 0) };
  }

  /** Why the node is suspect now, or undefined. */
  suspectOf(node: InventoryNode, nowMs: number): string | undefined {
    return node.suspect !== undefined && nowMs < node.suspect.untilMs ? node.suspect.reason : undefined;
  }

  /** How long the node has been silent as this instance can know it (see `heardAtMs`). */
  silenceMs(node: InventoryNode, nowMs: number): number {
    const at = node.remote && this.heardAtMs !== undefined ? Math.min(nowMs, Math.max(this.heardAtMs, node.lastSeenMs)) : nowMs;
    return at - node.lastSeenMs;
  }

  liveness(node: InventoryNode, nowMs: number): Liveness {
    const ago = this.silenceMs(node, nowMs);
    if (ago >= this.policy.lostAfterMs) return 'lost';
    if (!node.reported || ago >= this.policy.notReadyAfterMs) return 'not-ready';
    return 'ready';
  }

  /** The plain-data picture placement works on. */
  snapshot(nowMs: number): NodeSnapshot[] {
    return this.list().map((n) => nodeSnapshot(n, this.liveness(n, nowMs), nowMs));
  }
}
