import { SlotPool } from './pool.js';
import type { LoraAdapter } from './options.js';

/** An adapter's slots once loaded: a context with the LoRA applied, and how to free it. */
export interface LoadedSlots<S> {
  slots: S[];
  dispose: () => Promise<void>;
}

/** The slots of one adapter, held while a request uses them; `release` when done. */
export interface LoraLease<S> {
  pool: SlotPool<S>;
  release(): void;
}

interface Entry<S> {
  name: string;
  /** Settles once the adapter's context exists; requests that come meanwhile wait on it. */
  ready: Promise<SlotPool<S>>;
  dispose?: () => Promise<void>;
  /** Its slots, once loaded. */
  pool?: SlotPool<S>;
  /** Requests holding a lease: an adapter in use is never unloaded under them. */
  users: number;
  lastUse: number;
}

/**
 * The LoRA adapters a built-in engine serves by name (issue 31). node-llama-cpp applies
 * LoRA only when a context is created, so each adapter gets its own context (its own
 * slots and KV caches), created on the adapter's first request and disposed when more
 * than `maxLoras` are loaded: the least recently used one no request holds goes first.
 * Busy ones stay until their last request ends, so a request never loses its adapter
 * halfway; the count is back within `maxLoras` as soon as they do.
 */
export class LoraContexts<S> {
  private readonly byName: Map<string, LoraAdapter>;
  private readonly loaded = new Map<string, Entry<S>>();
  private uses = 0;
  /**
   * Unloads still under way: a load waits for them, since node-llama-cpp caches an
   * adapter's weights per path and an unload frees them (see the runtime's `create`).
   */
  private unloading: Promise<void> = Promise.resolve();
  /** Loads and unloads since start, for /metrics. */
  readonly counts = { loads: 0, unloads: 0 };

  constructor(
    adapters: readonly LoraAdapter[],
    private readonly maxLoras: number,
    /** Creates the adapter's context (rejects when llama.cpp cannot load the file). */
    private readonly create: (adapter: LoraAdapter) => Promise<LoadedSlots<S>>,
    private readonly log: (line: string) => void,
  ) {
    this.byName = new Map(adapters.map((a) => [a.name, a]));
  }

  /** Whether `name` is one of the adapters this engine serves. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** Every adapter served, in the order given. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The adapters loaded now, least recently used first. */
  loadedNames(): string[] {
    return [...this.loaded.values()].sort((a, b) => a.lastUse - b.lastUse).map((e) => e.name);
  }

  /** Requests waiting for a slot of a loaded adapter. */
  queued(): number {
    let n = 0;
    for (const e of this.loaded.values()) n += e.pool?.queued ?? 0;
    return n;
  }

  /** The adapter's slots, its context created first when it is not loaded. Rejects for an adapter this engine does not serve. */
  async lease(name: string): Promise<LoraLease<S>> {
    const adapter = this.byName.get(name);
    if (!adapter) throw new Error(`no LoRA adapter ${name}`);
    let entry = this.loaded.get(name);
    if (!entry) {
      const e = { name, users: 0, lastUse: 0 } as Entry<S>;
      e.ready = this.load(adapter, e);
      // Not awaited by everyone: a failed load is each waiter's error, never an unhandled one.
      e.ready.catch(() => undefined);
      this.loaded.set(name, (entry = e));
    }
    entry.users++;
    entry.lastUse = ++this.uses;
    const held = entry;
    let pool: SlotPool<S>;
    try {
      pool = await held.ready;
    } catch (err) {
      held.users--;
      throw err;
    }
    let released = false;
    return {
      pool,
      release: () => {
        if (released) return;
        released = true;
        held.users--;
        this.evict();
      },
    };
  }

  /** Disposes every adapter's context. */
  async close(): Promise<void> {
    const entries = [...this.loaded.values()];
    this.loaded.clear();
    await Promise.all(entries.map((e) => e.ready.then(() => e.dispose?.()).catch(() => undefined)));
    await this.unloading;
  }

  private async load(adapter: LoraAdapter, entry: Entry<S>): Promise<SlotPool<S>> {
    const started = performance.now();
    let made: LoadedSlots<S>;
    try {
      await this.unloading;
      made = await this.create(adapter);
    } catch (err) {
      // Not loaded: the next request tries again (the file may have been put right).
      if (this.loaded.get(adapter.name) === entry) this.loaded.delete(adapter.name);
      throw err;
    }
    entry.dispose = made.dispose;
    this.counts.loads++;
    this.log(`loaded adapter ${adapter.name} in ${((performance.now() - started) / 1000).toFixed(2)}s (${this.loaded.size} of ${this.maxLoras} loaded)`);
    entry.pool = new SlotPool(made.slots);
    this.evict();
    return entry.pool;
  }

  /** Unloads least recently used adapters no request holds while more than `maxLoras` are loaded. */
  private evict(): void {
    while (this.loaded.size > this.maxLoras) {
      const idle = [...this.loaded.values()].filter((e) => e.users === 0 && e.dispose !== undefined).sort((a, b) => a.lastUse - b.lastUse)[0];
      if (!idle) return;
      this.loaded.delete(idle.name);
      this.counts.unloads++;
      const dispose = idle.dispose!;
      const left = this.loaded.size;
      this.unloading = this.unloading.then(() =>
        dispose().then(
          () => this.log(`unloaded adapter ${idle.name} (least recently used; ${left} of ${this.maxLoras} loaded)`),
          (err: unknown) => this.log(`unloading adapter ${idle.name} failed: ${(err as Error).message}`),
        ),
      );
    }
  }
}
