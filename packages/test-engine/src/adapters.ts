import { setTimeout as sleep } from 'node:timers/promises';

/** One `--lora NAME=PATH`: an adapter served under its own name. */
export interface LoraAdapter {
  name: string;
  path: string;
}

/**
 * `--lora` values as adapters: each value is one `NAME=PATH` or several comma-joined (the
 * agent's `{adapters}` placeholder gives them so). Throws a one-line message naming the
 * bad entry; a name given twice, or the served model's own name, is refused.
 */
export function parseLoras(values: readonly string[], model: string): LoraAdapter[] {
  const out: LoraAdapter[] = [];
  const seen = new Set<string>();
  for (const entry of values.flatMap((v) => v.split(','))) {
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const name = eq < 0 ? '' : entry.slice(0, eq);
    const path = eq < 0 ? '' : entry.slice(eq + 1);
    if (name === '' || path === '') throw new Error(`--lora needs NAME=PATH, got '${entry}'`);
    if (name === model) throw new Error(`--lora ${name}: the adapter's name is the served model's`);
    if (seen.has(name)) throw new Error(`--lora ${name} is given twice`);
    seen.add(name);
    out.push({ name, path });
  }
  return out;
}

/** Every value of a repeatable flag in `argv` (`--flag V` and `--flag=V`), in order. */
export function repeatedValues(argv: readonly string[], flag: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === flag) {
      const v = argv[i + 1];
      if (v !== undefined) out.push(v);
      i++;
    } else if (arg.startsWith(`${flag}=`)) out.push(arg.slice(flag.length + 1));
  }
  return out;
}

/** What serving one request's adapter took: whether it had to be loaded, and which one it evicted. */
export interface AdapterUse {
  loaded: boolean;
  evicted?: string;
}

/**
 * The engine's adapter slots, as vLLM and SGLang keep them: at most `slots` adapters
 * loaded, the least recently used evicted to load another. A request for an adapter not
 * loaded waits `loadMs` (one load per adapter at a time: requests that come meanwhile
 * wait for the same load). An evicted adapter that a request is still using is not taken
 * from it (the simulated weights cost nothing); its next request loads it again, so an
 * eviction between the gateway's routing and the engine's serving costs a load, never a
 * failure.
 */
export class AdapterSlots {
  /** Loaded adapters in use order, least recently used first (a Set keeps insertion order). */
  private readonly held = new Set<string>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly known: ReadonlyMap<string, LoraAdapter>;
  /** Loads and evictions since start, per adapter, for /metrics. */
  readonly loads = new Map<string, number>();
  readonly evictions = new Map<string, number>();

  constructor(
    adapters: readonly LoraAdapter[],
    private readonly slots: number,
    private readonly loadMs: number,
  ) {
    this.known = new Map(adapters.map((a) => [a.name, a]));
  }

  /** The adapter named `name`, if this engine serves one by that name. */
  adapter(name: string): LoraAdapter | undefined {
    return this.known.get(name);
  }

  /** Every adapter given, loaded or not, in `--lora` order. */
  all(): LoraAdapter[] {
    return [...this.known.values()];
  }

  /** The loaded adapters, least recently used first. */
  loaded(): string[] {
    return [...this.held];
  }

  /**
   * Makes `name` (a known adapter) loaded and most recently used, loading it (and evicting
   * the least recently used when the slots are full) when it is not; resolves once it is
   * usable, or early with the use so far when `signal` aborts.
   */
  async use(name: string, signal?: AbortSignal): Promise<AdapterUse> {
    if (this.held.has(name)) {
      this.held.delete(name);
      this.held.add(name);
      const pending = this.loading.get(name);
      if (pending) await pending;
      return { loaded: false };
    }
    let evicted: string | undefined;
    if (this.held.size >= this.slots) {
      evicted = this.held.values().next().value;
      if (evicted !== undefined) {
        this.held.delete(evicted);
        this.evictions.set(evicted, (this.evictions.get(evicted) ?? 0) + 1);
      }
    }
    this.held.add(name);
    this.loads.set(name, (this.loads.get(name) ?? 0) + 1);
    if (this.loadMs > 0) {
      // Unref'd: a load nobody waits for any more must not keep a process (or a test run) alive.
      const load = sleep(this.loadMs, undefined, { ref: false }).then(() => {
        if (this.loading.get(name) === load) this.loading.delete(name);
      });
      this.loading.set(name, load);
      await (signal ? Promise.race([load, new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))]) : load);
    }
    return evicted === undefined ? { loaded: true } : { loaded: true, evicted };
  }

  /** Prometheus text: loads and evictions per adapter, and the adapters loaded now. */
  metrics(): string {
    const lines = [
      '# HELP llmgw_test_engine_adapter_loads_total LoRA adapter loads (a request for an adapter not in a slot)',
      '# TYPE llmgw_test_engine_adapter_loads_total counter',
      ...[...this.loads].map(([a, n]) => `llmgw_test_engine_adapter_loads_total{adapter="${a}"} ${n}`),
      '# HELP llmgw_test_engine_adapter_evictions_total LoRA adapters evicted to load another (least recently used first)',
      '# TYPE llmgw_test_engine_adapter_evictions_total counter',
      ...[...this.evictions].map(([a, n]) => `llmgw_test_engine_adapter_evictions_total{adapter="${a}"} ${n}`),
      '# HELP llmgw_test_engine_adapter_loaded 1 for each LoRA adapter loaded now',
      '# TYPE llmgw_test_engine_adapter_loaded gauge',
      ...[...this.held].map((a) => `llmgw_test_engine_adapter_loaded{adapter="${a}"} 1`),
    ];
    return `${lines.join('\n')}\n`;
  }
}
