import type { AdminState, Replica, RolloutControl, RolloutHistory, RolloutRecord } from '../domain.js';
import type {
  EventRetention,
  Fence,
  NodeReportRow,
  Store,
  StoredCredential,
  StoredEvent,
  StoredKey,
  StoredNode,
  StoredReplica,
  StoredToken,
  StoredUsage,
  UsageDelta,
} from './store.js';

/** The failures a disk gives, as Node reports them. */
export type Fault = 'ENOSPC' | 'EIO';

const ERRORS: Record<Fault, { message: string; errno: number; reads: boolean }> = {
  ENOSPC: { message: 'ENOSPC: no space left on device, write', errno: -28, reads: false },
  EIO: { message: 'EIO: i/o error, read', errno: -5, reads: true },
};

/**
 * A store that fails on demand, for tests: set `fault` and every write throws as a full
 * disk (ENOSPC; reads still work) or a failing one (EIO; reads fail too) would; clear it
 * and the store under it is used again. `writes` counts the attempts each way.
 */
export class FaultyStore implements Store {
  fault?: Fault;
  readonly writes = { ok: 0, failed: 0 };

  constructor(readonly inner: Store) {}

  get kind(): Store['kind'] {
    return this.inner.kind;
  }

  private check(write: boolean): void {
    if (!this.fault) return;
    const e = ERRORS[this.fault];
    if (!write && !e.reads) return;
    if (write) this.writes.failed++;
    throw Object.assign(new Error(e.message), { code: this.fault, errno: e.errno });
  }

  private async write<T>(fn: () => Promise<T>): Promise<T> {
    this.check(true);
    const r = await fn();
    this.writes.ok++;
    return r;
  }

  private async read<T>(fn: () => Promise<T>): Promise<T> {
    this.check(false);
    return fn();
  }

  loadNodes(): Promise<StoredNode[]> {
    return this.read(() => this.inner.loadNodes());
  }
  loadReplicas(): Promise<StoredReplica[]> {
    return this.read(() => this.inner.loadReplicas());
  }
  loadCredentials(): Promise<StoredCredential[]> {
    return this.read(() => this.inner.loadCredentials());
  }
  loadKeys(): Promise<StoredKey[]> {
    return this.read(() => this.inner.loadKeys());
  }
  loadUsage(sinceMs?: number): Promise<StoredUsage[]> {
    return this.read(() => this.inner.loadUsage(sinceMs));
  }
  loadTokens(): Promise<StoredToken[]> {
    return this.read(() => this.inner.loadTokens());
  }
  loadEvents(limit: number, afterId?: number): Promise<StoredEvent[]> {
    return this.read(() => this.inner.loadEvents(limit, afterId));
  }
  deleteNode(id: string): Promise<void> {
    return this.write(() => this.inner.deleteNode(id));
  }
  addCredential(c: StoredCredential): Promise<boolean> {
    return this.write(() => this.inner.addCredential(c));
  }
  saveNodeAdmin(id: string, admin: AdminState): Promise<void> {
    return this.write(() => this.inner.saveNodeAdmin(id, admin));
  }
  saveNodeReports(rows: readonly NodeReportRow[]): Promise<number | void> {
    return this.write(() => this.inner.saveNodeReports(rows));
  }
  writeReplicas(save: readonly Replica[], remove: readonly string[], fence?: Fence): Promise<void> {
    return this.write(() => this.inner.writeReplicas(save, remove, fence));
  }
  saveKey(key: StoredKey): Promise<void> {
    return this.write(() => this.inner.saveKey(key));
  }
  addUsage(deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
    return this.write(() => this.inner.addUsage(deltas));
  }
  saveToken(token: StoredToken): Promise<void> {
    return this.write(() => this.inner.saveToken(token));
  }
  addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]> {
    return this.write(() => this.inner.addEvents(events, keep));
  }
  loadRollouts(): Promise<RolloutRecord[]> {
    return this.read(() => this.inner.loadRollouts());
  }
  saveRolloutHistory(model: string, h: RolloutHistory): Promise<void> {
    return this.write(() => this.inner.saveRolloutHistory(model, h));
  }
  saveRolloutControl(model: string, c: RolloutControl): Promise<void> {
    return this.write(() => this.inner.saveRolloutControl(model, c));
  }
  probe(): Promise<void> {
    return this.write(() => this.inner.probe());
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
