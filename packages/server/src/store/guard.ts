import type { NodeReport } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { AdminState, Replica } from '../domain.js';
import { DomainError } from '../errors.js';
import type { EventRetention, Store, StoredCredential, StoredEvent, StoredKey, StoredNode, StoredReplica, StoredToken, StoredUsage, UsageDelta } from './store.js';

/** What `/healthz` says about the store. */
export type StoreHealth = { status: 'ok' } | { status: 'degraded'; reason: string; since: string };

export interface GuardOptions {
  log: Logger;
  /** How often a degraded store is asked whether it takes writes again. */
  probeIntervalMs?: number;
  now?: () => number;
}

/**
 * The store as the rest of the server sees it: any failure of the store under it (a
 * full disk, a read-only file, an I/O error, a corrupt page) becomes a `DomainError`
 * with code `store_unavailable` (503, `store unavailable: <reason>`) and marks the store
 * degraded, which `/healthz` and `llmgw_store_up` report. The next write that succeeds
 * (a caller's retry, or the probe this runs every few seconds while degraded) marks it
 * healthy again: no restart is needed once the disk has room.
 *
 * What callers do with the error is theirs to decide (see the store README): operator
 * writes are refused with memory unchanged; background state (usage, node reports,
 * replica records) stays in memory and is written again until it lands.
 */
export class GuardedStore implements Store {
  private down?: { reason: string; sinceMs: number };
  private readonly errors = new Map<string, number>();
  private depth = 0;
  private probeTimer?: NodeJS.Timeout;
  /** When a caller last tried to write: the probe stays out of the way of real writes. */
  private lastWriteMs = 0;
  private readonly now: () => number;

  constructor(
    private readonly inner: Store,
    private readonly opts: GuardOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  health(): StoreHealth {
    return this.down ? { status: 'degraded', reason: `store unavailable: ${this.down.reason}`, since: new Date(this.down.sinceMs).toISOString() } : { status: 'ok' };
  }

  /** For the metrics: whether writes work, and failures so far by operation. */
  stats(): { up: boolean; errors: ReadonlyMap<string, number> } {
    return { up: !this.down, errors: this.errors };
  }

  loadNodes(): StoredNode[] {
    return this.read('loadNodes', () => this.inner.loadNodes());
  }
  loadReplicas(): StoredReplica[] {
    return this.read('loadReplicas', () => this.inner.loadReplicas());
  }
  loadCredentials(): StoredCredential[] {
    return this.read('loadCredentials', () => this.inner.loadCredentials());
  }
  deleteNode(id: string): void {
    this.write('deleteNode', () => this.inner.deleteNode(id));
  }
  saveCredential(c: StoredCredential): void {
    this.write('saveCredential', () => this.inner.saveCredential(c));
  }
  loadKeys(): StoredKey[] {
    return this.read('loadKeys', () => this.inner.loadKeys());
  }
  loadUsage(): StoredUsage[] {
    return this.read('loadUsage', () => this.inner.loadUsage());
  }
  saveNodeAdmin(id: string, admin: AdminState): void {
    this.write('saveNodeAdmin', () => this.inner.saveNodeAdmin(id, admin));
  }
  saveNodeReport(id: string, report: NodeReport, lastSeenMs: number): void {
    this.write('saveNodeReport', () => this.inner.saveNodeReport(id, report, lastSeenMs));
  }
  saveReplica(replica: Replica): void {
    this.write('saveReplica', () => this.inner.saveReplica(replica));
  }
  deleteReplica(id: string): void {
    this.write('deleteReplica', () => this.inner.deleteReplica(id));
  }
  saveKey(key: StoredKey): void {
    this.write('saveKey', () => this.inner.saveKey(key));
  }
  addUsage(deltas: UsageDelta[]): void {
    this.write('addUsage', () => this.inner.addUsage(deltas));
  }
  loadTokens(): StoredToken[] {
    return this.read('loadTokens', () => this.inner.loadTokens());
  }
  saveToken(token: StoredToken): void {
    this.write('saveToken', () => this.inner.saveToken(token));
  }
  addEvents(events: StoredEvent[], keep: EventRetention): void {
    this.write('addEvents', () => this.inner.addEvents(events, keep));
  }
  loadEvents(limit: number): StoredEvent[] {
    return this.read('loadEvents', () => this.inner.loadEvents(limit));
  }
  probe(): void {
    this.write('probe', () => this.inner.probe());
  }

  transaction<T>(fn: () => T): T {
    // An error thrown by `fn` itself (not by a write inside it) is the caller's, not the store's.
    let callerError = false;
    return this.write('transaction', () =>
      this.inner.transaction(() => {
        try {
          return fn();
        } catch (err) {
          callerError = !(err instanceof DomainError && err.code === 'store_unavailable');
          throw err;
        }
      }),
      () => callerError,
    );
  }

  close(): void {
    this.stopProbe();
    this.inner.close();
  }

  private read<T>(op: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw this.failed(op, err);
    }
  }

  private write<T>(op: string, fn: () => T, passThrough: () => boolean = () => false): T {
    if (op !== 'probe') this.lastWriteMs = this.now();
    this.depth++;
    let result: T;
    try {
      result = fn();
    } catch (err) {
      if (passThrough()) throw err;
      throw this.failed(op, err);
    } finally {
      this.depth--;
    }
    // Inside a transaction nothing is written until the outer commit succeeds.
    if (this.depth === 0) this.recovered();
    return result;
  }

  private failed(op: string, err: unknown): DomainError {
    if (err instanceof DomainError && err.code === 'store_unavailable') return err;
    this.errors.set(op, (this.errors.get(op) ?? 0) + 1);
    const reason = describe(err);
    if (!this.down) {
      this.down = { reason, sinceMs: this.now() };
      this.opts.log.error({ op, reason }, `store unavailable: ${reason}; writes answer 503 and background state stays in memory until it recovers`);
      this.probeTimer = setInterval(() => this.tryProbe(), this.opts.probeIntervalMs ?? 2000);
      this.probeTimer.unref();
    } else if (this.down.reason !== reason) {
      this.opts.log.warn({ op, reason }, `store still unavailable: ${reason}`);
      this.down.reason = reason;
    }
    return new DomainError('store_unavailable', `store unavailable: ${reason}`);
  }

  private recovered(): void {
    if (!this.down) return;
    const s = Math.round((this.now() - this.down.sinceMs) / 1000);
    this.opts.log.info({ downS: s }, `store available again after ${s} s`);
    this.down = undefined;
    this.stopProbe();
  }

  /**
   * Only when no caller wrote since the last probe: while usage or replica records are
   * pending, their own retries say whether the store takes writes (a store whose usage
   * pages are corrupt may still take the probe's write, and must stay degraded).
   */
  private tryProbe(): void {
    if (this.now() - this.lastWriteMs < (this.opts.probeIntervalMs ?? 2000)) return;
    try {
      this.probe();
    } catch {
      // Still down; `failed` has counted it and kept the reason up to date.
    }
  }

  private stopProbe(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = undefined;
  }
}

/** A store error as a short line: its message and, when the message does not say it, its code. */
function describe(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null | undefined;
  const message = (typeof e?.message === 'string' ? e.message : String(err)).split('\n', 1)[0]!.slice(0, 200);
  const code = typeof e?.code === 'string' ? e.code : undefined;
  return code && !message.includes(code) ? `${message} (${code})` : message;
}
