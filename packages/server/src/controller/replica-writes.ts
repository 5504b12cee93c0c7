import type { Logger } from 'pino';
import type { Replica } from '../domain.js';
import { serialWrites } from '../store/serial.js';
import type { Fence, Store } from '../store/store.js';

/**
 * Writes the replicas a reconcile pass or a shard report changed, with any the store
 * refused before, as one batch: a pass lands in the store whole or not at all. Memory
 * is the source of truth: the plan is already applied (agents get their assignments),
 * so when the store refuses, the ids stay pending and the next pass or heartbeat writes
 * each one as it is then (saved if it exists, deleted if it does not). One write at a
 * time; what changes meanwhile goes in the next.
 */
export class ReplicaWrites {
  /** Replicas changed in memory whose record the store has not taken yet. */
  private readonly unsaved = new Set<string>();
  private fence?: Fence;

  constructor(
    private readonly store: Store,
    private readonly current: (id: string) => Replica | undefined,
    private readonly log: Logger,
  ) {}

  /** Resolves whether nothing is left pending; never rejects. `fence`: a leader's writes on a shared store. */
  persist(changed: readonly string[], fence?: Fence): Promise<boolean> {
    for (const id of changed) this.unsaved.add(id);
    this.fence = fence;
    return this.flush();
  }

  private readonly flush = serialWrites(
    () => this.unsaved.size > 0,
    async () => {
      const ids = [...this.unsaved];
      this.unsaved.clear();
      const save: Replica[] = [];
      const remove: string[] = [];
      for (const id of ids) {
        const r = this.current(id);
        if (r) save.push(r);
        else remove.push(id);
      }
      try {
        await this.store.writeReplicas(save, remove, this.fence);
        return true;
      } catch (err) {
        for (const id of ids) this.unsaved.add(id);
        this.log.debug({ replicas: ids.length, err: (err as Error).message }, 'replica records kept in memory until the store takes writes again');
        return false;
      }
    },
  );
}
