import type { Liveness, NodeAdminState, NodeReport } from '@llmgw/shared';
import type { AdminState } from './domain.js';
import type { NodeSnapshot } from './snapshot.js';
import type { Store } from './store/store.js';

export interface LivenessPolicy {
  /** Seconds without a heartbeat before a node is `not-ready` (no traffic, no placement). */
  notReadyAfterS: number;
  /** Seconds without a heartbeat before a node is `lost` (its replicas are replaced). */
  lostAfterS: number;
}

export interface InventoryNode {
  id: string;
  admin: AdminState;
  report?: NodeReport;
  /** For a node known only from the store, the server's start: it gets a full grace to report. */
  lastSeenMs: number;
  /** False until the node's first heartbeat since the server started. */
  reported: boolean;
}

/**
 * The fleet as agents report it, plus the operators' admin states. Reports live in
 * memory (and the last one in the store, so `ctl nodes` still lists a node after a
 * server restart); admin states are written through to the store.
 */
export class Inventory {
  private readonly nodes = new Map<string, InventoryNode>();
  private readonly savedReports = new Map<string, string>();

  constructor(
    private readonly store: Store,
    readonly policy: LivenessPolicy,
    bootMs: number = Date.now(),
  ) {
    for (const n of store.loadNodes()) {
      // A node remembered from before a restart gets no traffic until its agent speaks
      // again, and is lost only if it stays silent a whole grace counted from the boot:
      // a restarted server must not replace every replica in the fleet.
      this.nodes.set(n.id, { id: n.id, admin: n.admin, ...(n.report ? { report: n.report } : {}), lastSeenMs: bootMs, reported: false });
      if (n.report) this.savedReports.set(n.id, JSON.stringify(n.report));
    }
  }

  /** Records a heartbeat. Returns true when the report differs from the last one. */
  report(report: NodeReport, nowMs: number): boolean {
    const existing = this.nodes.get(report.node_id);
    const node: InventoryNode = existing ?? { id: report.node_id, admin: { state: 'ready' }, lastSeenMs: 0, reported: false };
    const wasLive = existing ? this.liveness(existing, nowMs) === 'ready' : false;
    node.report = report;
    node.lastSeenMs = nowMs;
    node.reported = true;
    this.nodes.set(node.id, node);
    const json = JSON.stringify(report);
    const changed = this.savedReports.get(node.id) !== json;
    if (changed) {
      this.store.saveNodeReport(node.id, report, nowMs);
      this.savedReports.set(node.id, json);
    }
    return changed || !wasLive;
  }

  get(id: string): InventoryNode | undefined {
    return this.nodes.get(id);
  }

  list(): InventoryNode[] {
    return [...this.nodes.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Sets a node's admin state. Returns false for an unknown node. */
  setAdmin(id: string, state: NodeAdminState, reason: string | undefined, now: Date, drain: { deadlineS?: number; force?: boolean } = {}): boolean {
    const node = this.nodes.get(id);
    if (!node) return false;
    const admin: AdminState = {
      state,
      ...(reason ? { reason } : {}),
      changedAt: now.toISOString(),
      ...(state === 'draining' && drain.deadlineS !== undefined ? { drainDeadline: new Date(now.getTime() + drain.deadlineS * 1000).toISOString() } : {}),
      ...(state === 'draining' && drain.force ? { force: true } : {}),
    };
    // Stored first: a state the store refused is neither acknowledged nor acted on.
    this.store.saveNodeAdmin(id, admin);
    node.admin = admin;
    return true;
  }

  liveness(node: InventoryNode, nowMs: number): Liveness {
    const ago = (nowMs - node.lastSeenMs) / 1000;
    if (ago >= this.policy.lostAfterS) return 'lost';
    if (!node.reported || ago >= this.policy.notReadyAfterS) return 'not-ready';
    return 'ready';
  }

  /** The plain-data picture placement works on. */
  snapshot(nowMs: number): NodeSnapshot[] {
    return this.list().map((n) => toSnapshot(n, this.liveness(n, nowMs), nowMs));
  }
}

function toSnapshot(n: InventoryNode, liveness: Liveness, nowMs: number): NodeSnapshot {
  const r = n.report;
  return {
    id: n.id,
    ...(r?.pool ? { pool: r.pool } : {}),
    labels: r?.labels ?? {},
    admin: n.admin.state,
    ...(n.admin.reason ? { adminReason: n.admin.reason } : {}),
    liveness,
    lastSeenAgoS: Math.max(0, Math.round((nowMs - n.lastSeenMs) / 1000)),
    ...(r?.memory_total_mb !== undefined ? { memoryTotalMb: r.memory_total_mb } : {}),
    ...(r?.cpu_cores !== undefined ? { cpuCores: r.cpu_cores } : {}),
    gpus: r?.gpus ?? [],
    fabrics: r?.fabrics ?? [],
    ...(n.admin.state === 'draining' && n.admin.drainDeadline ? { drainDeadlineMs: Date.parse(n.admin.drainDeadline) } : {}),
    ...(n.admin.state === 'draining' && n.admin.force ? { drainForce: true } : {}),
  };
}
