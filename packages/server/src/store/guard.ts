import type { Logger } from 'pino';
import type { AdminState, Replica, RolloutControl, RolloutHistory, RolloutRecord } from '../domain.js';
import { DomainError } from '../errors.js';
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
 * replica records) stays in memory and is written again until it lands. A leader's
 * fenced write refused because its lease is gone (`not_leader`) is not a store failure.
 */
export class GuardedStore implements Store {
  private down?: { reason: string; sinceMs: number };
  private readonly errors = new Map<string, number>();
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
    return this.down
      ? { status: 'degraded', reason: `store unavailable: ${this.down.reason}`, since: new Date(this.down.sinceMs).toISOString() }
      : { status: 'ok' };
  }

  /** For the metrics: whether writes work, and failures so far by operation. */
  stats(): { up: boolean; errors: ReadonlyMap<string, number> } {
    return { up: !this.down, errors: this.errors };
  }

  get kind(): Store['kind'] {
    return this.inner.kind;
  }

  loadNodes(): Promise<StoredNode[]> {
    return this.read('loadNodes', () => this.inner.loadNodes());
  }
  loadReplicas(): Promise<StoredReplica[]> {
    return this.read('loadReplicas', () => this.inner.loadReplicas());
  }
  loadCredentials(): Promise<StoredCredential[]> {
    return this.read('loadCredentials', () => this.inner.loadCredentials());
  }
  loadKeys(): Promise<StoredKey[]> {
    return this.read('loadKeys', () => this.inner.loadKeys());
  }
  loadUsage(sinceMs?: number): Promise<StoredUsage[]> {
    return this.read('loadUsage', () => this.inner.loadUsage(sinceMs));
  }
  loadTokens(): Promise<StoredToken[]> {
    return this.read('loadTokens', () => this.inner.loadTokens());
  }
  loadEvents(limit: number, afterId?: number): Promise<StoredEvent[]> {
    return this.read('loadEvents', () => this.inner.loadEvents(limit, afterId));
  }
  deleteNode(id: string): Promise<void> {
    return this.write('deleteNode', () => this.inner.deleteNode(id));
  }
  addCredential(c: StoredCredential): Promise<boolean> {
    return this.write('addCredential', () => this.inner.addCredential(c));
  }
  saveNodeAdmin(id: string, admin: AdminState): Promise<void> {
    return this.write('saveNodeAdmin', () => this.inner.saveNodeAdmin(id, admin));
  }
  saveNodeReports(rows: readonly NodeReportRow[]): Promise<number | void> {
    return this.write('saveNodeReports', () => this.inner.saveNodeReports(rows));
  }
  writeReplicas(save: readonly Replica[], remove: readonly string[], fence?: Fence): Promise<void> {
    return this.write('writeReplicas', () => this.inner.writeReplicas(save, remove, fence), isNotLeader);
  }
  saveKey(key: StoredKey): Promise<void> {
    return this.write('saveKey', () => this.inner.saveKey(key));
  }
  addUsage(deltas: readonly UsageDelta[]): Promise<UsageDelta[]> {
    return this.write('addUsage', () => this.inner.addUsage(deltas));
  }
  saveToken(token: StoredToken): Promise<void> {
    return this.write('saveToken', () => this.inner.saveToken(token));
  }
  addEvents(events: readonly StoredEvent[], keep: EventRetention): Promise<StoredEvent[]> {
    return this.write('addEvents', () => this.inner.addEvents(events, keep));
  }
  loadRollouts(): Promise<RolloutRecord[]> {
    return this.read('loadRollouts', () => this.inner.loadRollouts());
  }
  saveRolloutHistory(model: string, h: RolloutHistory): Promise<void> {
    return this.write('saveRolloutHistory', () => this.inner.saveRolloutHistory(model, h));
  }
  saveRolloutControl(model: string, c: RolloutControl): Promise<void> {
    return this.write('saveRolloutControl', () => this.inner.saveRolloutControl(model, c));
  }
  probe(): Promise<void> {
    return this.write('probe', () => this.inner.probe());
  }

  async close(): Promise<void> {
    this.stopProbe();
    await this.inner.close();
  }

  private async read<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.failed(op, err);
    }
  }

  /** `passThrough`: errors that are the caller's answer, not the store failing (a lost lease). */
  private async write<T>(op: string, fn: () => Promise<T>, passThrough: (err: unknown) => boolean = () => false): Promise<T> {
    if (op !== 'probe') this.lastWriteMs = this.now();
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      if (passThrough(err)) throw err;
      throw this.failed(op, err);
    }
    this.recovered();
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
    // Still down when it fails; `failed` has counted it and kept the reason up to date.
    this.probe().catch(() => undefined);
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

function isNotLeader(err: unknown): boolean {
  return err instanceof DomainError && err.code === 'not_leader';
}
