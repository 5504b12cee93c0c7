/**
 * When a replica is *saturated* (DESIGN.md §16): a request sent to it now would wait in
 * the engine's queue longer than a small bound. Pure: it reads what the gateway already
 * keeps (cache-aware routing's uncached prompt tokens in flight and measured prefill
 * rates, the requests in flight), so the decision costs no I/O and no extra state.
 */

/** What the gateway knows of one replica's load. */
export interface ReplicaPressure {
  /** Uncached prompt tokens sent to it whose prefill has not ended. */
  uncachedTokens: number;
  /** Its measured prefill rate, tokens/s; undefined when nothing was measured (an engine that reports no usage). */
  prefillRate?: number;
  /** Requests in flight on it. */
  inFlight: number;
}

export interface SaturationSettings {
  /** Longest estimated queue wait of a replica that is not saturated, ms. */
  maxWaitMs: number;
  /** Without a prefill rate: requests in flight at which a replica is saturated. */
  maxInFlight: number;
}

/**
 * 25 ms of prefill queued. A request sent to a replica waits for everything queued there
 * before its own prefill starts, and nothing can take that back: with 250 ms (the first
 * default) a quiet key's first token came 5× later beside a noisy key than alone, every
 * request paying the full engine queue (bench/fairness.bench.mjs). At 25 ms a replica
 * takes a prompt while the prefill ahead of it is shorter than a typical short prompt's,
 * so short prompts still stack a little (the engine is never idle waiting for the
 * gateway) and long ones wait here, where the fair queue orders them. Engines that batch
 * prefills may want more (`--saturation-wait`). 64 requests in flight for an
 * engine that reports no usage: well below the batch sizes engines run (vLLM's 256), so
 * the bound is reached only when the engine is really full.
 */
export const DEFAULT_SATURATION: SaturationSettings = { maxWaitMs: 25, maxInFlight: 64 };

/** Seconds a request sent now would wait for the prefill ahead of it, when the rate is known. */
export function estimatedWaitS(p: ReplicaPressure): number | undefined {
  return p.prefillRate && p.prefillRate > 0 ? p.uncachedTokens / p.prefillRate : undefined;
}

/** Whether a replica's estimated queue wait is above the bound (or, with no rate, its requests in flight at the bound). */
export function isSaturated(p: ReplicaPressure, s: SaturationSettings = DEFAULT_SATURATION): boolean {
  const wait = estimatedWaitS(p);
  return wait === undefined ? p.inFlight >= s.maxInFlight : wait * 1000 > s.maxWaitMs;
}

/**
 * The pressure of each replica, a replica not measured yet taking the mean rate of those
 * that are (as cache-aware routing does), so one new replica beside measured ones is
 * judged by the same clock.
 */
export function pressures(
  ids: readonly string[],
  uncached: (id: string) => number,
  rate: (id: string) => number | undefined,
  inFlight: (id: string) => number,
): ReplicaPressure[] {
  let sum = 0;
  let k = 0;
  for (const id of ids) {
    const r = rate(id);
    if (r === undefined) continue;
    sum += r;
    k++;
  }
  const mean = k ? sum / k : undefined;
  return ids.map((id) => {
    const r = rate(id) ?? mean;
    return { uncachedTokens: uncached(id), inFlight: inFlight(id), ...(r !== undefined ? { prefillRate: r } : {}) };
  });
}

/** Whether a request must wait: at least one replica could serve it and every one of them is saturated. */
export function allSaturated(ps: readonly ReplicaPressure[], s: SaturationSettings = DEFAULT_SATURATION): boolean {
  return ps.length > 0 && ps.every((p) => isSaturated(p, s));
}

/** How the load of a model's replicas is read, replica by replica (cache-aware routing's state, the requests in flight). */
export interface LoadReader {
  uncached(replicaId: string): number;
  rate(replicaId: string): number | undefined;
  inFlight(replicaId: string): number;
}

/**
 * {@link allSaturated} over the replicas as they are, allocating nothing: this runs on
 * every request, and below saturation it answers at the first replica with room.
 */
export function everySaturated(
  ids: readonly { replicaId: string }[],
  eligible: (replicaId: string) => boolean,
  load: LoadReader,
  s: SaturationSettings = DEFAULT_SATURATION,
): boolean {
  let sum = 0;
  let k = 0;
  let any = false;
  for (const { replicaId } of ids) {
    if (!eligible(replicaId)) continue;
    any = true;
    const r = load.rate(replicaId);
    if (r === undefined) continue;
    sum += r;
    k++;
  }
  if (!any) return false;
  const mean = k ? sum / k : undefined;
  const p: ReplicaPressure = { uncachedTokens: 0, inFlight: 0 };
  for (const { replicaId } of ids) {
    if (!eligible(replicaId)) continue;
    p.uncachedTokens = load.uncached(replicaId);
    p.inFlight = load.inFlight(replicaId);
    p.prefillRate = load.rate(replicaId) ?? mean;
    if (!isSaturated(p, s)) return false;
  }
  return true;
}

/**
 * Seconds until a request with `tokensAhead` queued before it could be placed: their
 * prefill at the replicas' summed rate, at least 1 s (HTTP's `Retry-After` is whole
 * seconds) and at most 60.
 */
export function retryAfterS(tokensAhead: number, ps: readonly ReplicaPressure[]): number {
  let rate = 0;
  for (const p of ps) rate += p.prefillRate ?? 0;
  const s = rate > 0 ? Math.ceil(tokensAhead / rate) : 1;
  return Math.min(60, Math.max(1, s));
}
