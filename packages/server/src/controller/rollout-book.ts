import type { Model } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { RolloutControl, RolloutRecord } from '../domain.js';
import type { RolloutChange, RolloutHalt, RolloutStatus } from '../reconcile/reconcile.js';

export type { RolloutChange };
import { describeChange, revisionContent, revisionOf } from '../reconcile/revision.js';
import { ROLLOUT_HISTORY_KEPT } from '../store/rows.js';
import type { Store } from '../store/store.js';

/**
 * The controller's memory of rollouts: each model's revision under the catalog in force,
 * the stored records (revisions seen, halts, the operator's pause and resume), and where
 * each rollout stood after the last pass. Records are written through to the store;
 * where a rollout stands is derived by every pass, never stored.
 */
export class RolloutBook {
  private readonly records = new Map<string, RolloutRecord>();
  private revisionsFor?: { models: readonly Model[]; revisions: Map<string, string> };
  private statuses = new Map<string, RolloutStatus>();
  /** Writes in order, so a later record never lands before an earlier one. */
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    stored: readonly RolloutRecord[] = [],
  ) {
    for (const r of stored) this.records.set(r.model, r);
  }

  /** Each model's revision now, worked out once per catalog. */
  revisions(models: readonly Model[]): Map<string, string> {
    if (this.revisionsFor?.models !== models) this.revisionsFor = { models, revisions: new Map(models.map((m) => [m.name, revisionOf(m)])) };
    return this.revisionsFor.revisions;
  }

  /** The stored records, for a pass's snapshot. */
  all(): ReadonlyMap<string, RolloutRecord> {
    return this.records;
  }

  get(model: string): RolloutRecord | undefined {
    return this.records.get(model);
  }

  /**
   * The record as the store has it: on PostgreSQL another instance may have paused,
   * resumed or halted it since this one last read; on SQLite this one's memory is the store's.
   */
  async read(model: string): Promise<RolloutRecord | undefined> {
    if (this.store.kind !== 'postgres') return this.records.get(model);
    return (await this.store.loadRollouts()).find((r) => r.model === model);
  }

  status(model: string): RolloutStatus | undefined {
    return this.statuses.get(model);
  }

  /** Replaces the records with the store's (a new term's leader, and each shared pass: a pause may come through another instance). */
  replace(stored: readonly RolloutRecord[]): void {
    this.records.clear();
    for (const r of stored) this.records.set(r.model, r);
  }

  /**
   * Records each model whose revision became current: appended to its history with what
   * changed (a reverted revision moves to the end), and a halt of another revision
   * dropped, so trying a fixed file again is a new rollout. Returns the models' changes.
   */
  observe(models: readonly Model[], nowMs: number): RolloutChange[] {
    const changes: RolloutChange[] = [];
    const revisions = this.revisions(models);
    for (const m of models) {
      const revision = revisions.get(m.name)!;
      const record = this.records.get(m.name) ?? { model: m.name, history: [] };
      const last = record.history.at(-1);
      if (last?.revision === revision) continue;
      const content = revisionContent(m);
      const change = describeChange(last?.content, content);
      const history = [...record.history.filter((e) => e.revision !== revision), { revision, sinceMs: nowMs, change, content }].slice(-ROLLOUT_HISTORY_KEPT);
      const { halted: _dropped, ...rest } = record;
      const halted = record.halted?.revision === revision ? record.halted : undefined;
      this.save({ ...rest, history, ...(halted ? { halted } : {}) });
      if (last) changes.push({ model: m.name, revision, state: 'progressing', change });
    }
    return changes;
  }

  /** After a pass: stores its halts, keeps its statuses, and returns the rollouts whose state changed. */
  afterPass(statuses: Map<string, RolloutStatus>, halts: readonly RolloutHalt[], nowMs: number): RolloutChange[] {
    for (const h of halts) {
      const record = this.records.get(h.model) ?? { model: h.model, history: [] };
      this.save({ ...record, halted: { revision: h.revision, reason: h.reason, atMs: nowMs } });
      this.log.warn({ model: h.model, revision: h.revision }, `rollout of ${h.model} to revision ${h.revision} halted: ${h.reason}`);
    }
    const changes: RolloutChange[] = [];
    for (const [model, s] of statuses) {
      const before = this.statuses.get(model);
      if (before && (before.state !== s.state || before.revision !== s.revision) && s.state !== 'progressing') {
        changes.push({ model, revision: s.revision, state: s.state, ...(s.reason ? { reason: s.reason } : {}) });
      }
    }
    this.statuses = statuses;
    return changes;
  }

  /**
   * `ctl rollout pause|resume`: the operator's part of the record as `change` makes it from
   * the stored one, written at once, so the next pass (here or at the leader) follows it.
   */
  async control(model: string, change: (stored: RolloutRecord | undefined) => RolloutControl): Promise<RolloutRecord> {
    const stored = await this.read(model);
    const c = change(stored);
    const record = stored ?? { model, history: [] };
    const { paused: _p, resumed: _r, ...rest } = record;
    const next: RolloutRecord = { ...rest, ...c };
    await this.store.saveRolloutControl(model, c);
    this.records.set(model, next);
    return next;
  }

  /** Resolves once every record written so far is stored (or failed): a reader of the store then sees them. */
  settled(): Promise<void> {
    return this.writes;
  }

  private save(record: RolloutRecord): void {
    this.records.set(record.model, record);
    const { model, history, halted } = record;
    this.writes = this.writes
      .then(() => this.store.saveRolloutHistory(model, { history, ...(halted ? { halted } : {}) }))
      .catch((err: Error) => this.log.warn({ model, err: err.message }, `rollout history of ${model} not stored: ${err.message}`));
  }
}
