/** Raised by {@link SlotPool.acquire} when the caller's signal fires while it waits. */
export class QueueAbortedError extends Error {
  override readonly name = 'QueueAbortedError';
}

interface Waiter<T> {
  resolve(slot: T): void;
  reject(e: Error): void;
  signal?: AbortSignal;
  /** An arrow function, so it can be handed to addEventListener as is. */
  onAbort: () => void;
}

/**
 * A fixed set of slots (context sequences) handed out to waiters first come, first
 * served. A waiter whose signal fires leaves the queue at once, so a client that gives
 * up never takes a slot later. A caller may choose among the free slots (the runtime
 * picks the one whose KV cache holds most of its prompt); otherwise free slots go out
 * most recently released first: that slot's cache holds the latest conversation, which
 * the next turn most likely extends. A slot released while others wait goes to the first.
 */
export class SlotPool<T> {
  /** Least recently released first. */
  private readonly free: T[];
  private readonly waiters: Waiter<T>[] = [];

  /** All slots, busy or free. */
  readonly size: number;

  constructor(slots: readonly T[]) {
    this.free = [...slots];
    this.size = slots.length;
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiters.length;
  }

  /** Slots in use. */
  get busy(): number {
    return this.size - this.free.length;
  }

  /**
   * A free slot now, or the next one released. `choose` picks among free slots (given
   * least recently released first) by returning an index; without it, the last.
   */
  acquire(signal?: AbortSignal, choose?: (free: readonly T[]) => number): Promise<T> {
    if (signal?.aborted) return Promise.reject(new QueueAbortedError('aborted before a slot was free'));
    const free = this.free;
    const chosen = choose !== undefined && free.length > 0 ? choose(free) : free.length - 1;
    // An index out of range takes the default rather than leaving a free slot unused.
    const slot = free.splice(Number.isInteger(chosen) && chosen >= 0 && chosen < free.length ? chosen : free.length - 1, 1)[0];
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiters.indexOf(waiter);
          if (i !== -1) this.waiters.splice(i, 1);
          reject(new QueueAbortedError('aborted while waiting for a slot'));
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  release(slot: T): void {
    const next = this.waiters.shift();
    if (next === undefined) {
      this.free.push(slot);
      return;
    }
    next.signal?.removeEventListener('abort', next.onAbort);
    next.resolve(slot);
  }
}
