import type { Logger } from 'pino';
import type { Replica } from '../domain.js';
import { serialWrites } from '../store/serial.js';
import type { Store } from '../store/store.js';

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

  constructor(
    private readonly store: Store,
    private readonly current: (id: string) => Replica | undefined,
    private readonly log: Logger,
  ) {}

  /** Resolves whether nothing is left pending; never rejects. */
  persist(changed: readonly string[]): Promise<boolean> {
    for (const id of changed) this.unsaved.add(id);
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
        await this.store.writeReplicas(save, remove);
        return true;
      } catch (err) {
        for (const id of ids) this.unsaved.add(id);
        this.log.debug({ replicas: ids.length, err: (err as Error).message }, 'replica records kept in memory until the store takes writes again');
        return false;
      }
    },
  );
}
