import type { NodeReport } from '@llmgw/shared';
import type { AdminState, Replica } from '../domain.js';
import type { EventRetention, Store, StoredCredential, StoredEvent, StoredKey, StoredNode, StoredReplica, StoredToken, StoredUsage, UsageDelta } from './store.js';

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

  private check(write: boolean): void {
    if (!this.fault) return;
    const e = ERRORS[this.fault];
    if (!write && !e.reads) return;
    if (write) this.writes.failed++;
    throw Object.assign(new Error(e.message), { code: this.fault, errno: e.errno });
  }

  private write<T>(fn: () => T): T {
    this.check(true);
    const r = fn();
    this.writes.ok++;
    return r;
  }

  loadNodes(): StoredNode[] {
    this.check(false);
    return this.inner.loadNodes();
  }
  loadReplicas(): StoredReplica[] {
    this.check(false);
    return this.inner.loadReplicas();
  }
  loadCredentials(): StoredCredential[] {
    this.check(false);
    return this.inner.loadCredentials();
  }
  deleteNode(id: string): void {
    this.write(() => this.inner.deleteNode(id));
  }
  saveCredential(c: StoredCredential): void {
    this.write(() => this.inner.saveCredential(c));
  }
  loadKeys(): StoredKey[] {
    this.check(false);
    return this.inner.loadKeys();
  }
  loadUsage(): StoredUsage[] {
    this.check(false);
    return this.inner.loadUsage();
  }
  saveNodeAdmin(id: string, admin: AdminState): void {
    this.write(() => this.inner.saveNodeAdmin(id, admin));
  }
  saveNodeReport(id: string, report: NodeReport, lastSeenMs: number): void {
    this.write(() => this.inner.saveNodeReport(id, report, lastSeenMs));
  }
  saveReplica(replica: Replica): void {
    this.write(() => this.inner.saveReplica(replica));
  }
  deleteReplica(id: string): void {
    this.write(() => this.inner.deleteReplica(id));
  }
  saveKey(key: StoredKey): void {
    this.write(() => this.inner.saveKey(key));
  }
  addUsage(deltas: UsageDelta[]): void {
    this.write(() => this.inner.addUsage(deltas));
  }
  loadTokens(): StoredToken[] {
    this.check(false);
    return this.inner.loadTokens();
  }
  saveToken(token: StoredToken): void {
    this.write(() => this.inner.saveToken(token));
  }
  addEvents(events: StoredEvent[], keep: EventRetention): void {
    this.write(() => this.inner.addEvents(events, keep));
  }
  loadEvents(limit: number): StoredEvent[] {
    this.check(false);
    return this.inner.loadEvents(limit);
  }
  transaction<T>(fn: () => T): T {
    // The commit fails too: a fault set while the transaction runs loses all of it.
    return this.inner.transaction(() => {
      const r = fn();
      this.check(true);
      return r;
    });
  }
  probe(): void {
    this.write(() => this.inner.probe());
  }
  close(): void {
    this.inner.close();
  }
}
