import { describe, expect, it } from '@jest/globals';
import type { RouteTarget } from '../controller/controller.js';
import { Metrics } from '../metrics.js';
import type { Routed } from './balancer.js';
import { CacheAware } from './cache-aware.js';

const targets: RouteTarget[] = ['r-1', 'r-2', 'r-3'].map((replicaId) => ({ replicaId, endpoint: `http://${replicaId}`, apiKey: 'k' }));
const system = (g: number) => `Group ${g} system prompt: answer briefly and politely. `.repeat(40);
/** A chat request of group `g` with its own question. */
const req = (g: number, q = 'why?', overrides: Partial<Routed> = {}): Routed => ({
  model: 'm',
  body: {
    messages: [
      { role: 'system', content: system(g) },
      { role: 'user', content: q },
    ],
  },
  ...overrides,
});
const none = () => 0;
const all = () => true;
const only =
  (...ids: string[]) =>
  (id: string) =>
    ids.includes(id);
const served = (prompt: number, cached: number) => ({ answered: true, usage: { prompt_tokens: prompt, completion_tokens: 1, cached_tokens: cached } });

/** Picks and ends the attempt at once, as a request that was served. */
function serve(b: CacheAware, r: Routed, eligible: (id: string) => boolean = all, cached?: number): string {
  const t = b.pick(targets, none, eligible, r)!;
  b.ended(r, t, cached === undefined ? { answered: true } : served(600, cached));
  return t.replicaId;
}

async function decisions(m: Metrics): Promise<string> {
  return (await m.registry.getSingleMetricAsString('llmgw_routing_decisions_total'))
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

/** Decisions of one kind, over all replicas. */
async function count(m: Metrics, decision: string): Promise<number> {
  const { values } = await m.routingDecisions.get();
  return values.filter((v) => v.labels.decision === decision).reduce((a, v) => a + v.value, 0);
}

describe('CacheAware', () => {
  it('sends a prompt back to the replica that prefilled it, though the others are as idle', async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    const first = serve(b, req(1, 'a'));
    for (let i = 0; i < 20; i++) expect(serve(b, req(1, `question ${i}`))).toBe(first);
    const out = await decisions(metrics);
    expect(out).toContain(`{model="m",replica="${first}",decision="no_affinity"} 1`);
    expect(out).toContain(`{model="m",replica="${first}",decision="kept"} 20`);
  });

  it('spreads distinct prompts like least-loaded (no affinity anywhere)', () => {
    const b = new CacheAware();
    const seen = new Set<string>();
    for (let g = 0; g < 60; g++) seen.add(serve(b, req(g)));
    expect(seen.size).toBe(3);
  });

  it('sends a new prefix to the emptiest cache among the least loaded', () => {
    const b = new CacheAware();
    for (const g of [1, 2]) serve(b, req(g), only('r-1'));
    serve(b, req(3), only('r-2'));
    expect(serve(b, req(4))).toBe('r-3');
    // Load still comes first: r-3 busy, the new prefix goes to the emptier of the others.
    expect(b.pick(targets, (id) => (id === 'r-3' ? 1 : 0), all, req(5))?.replicaId).toBe('r-2');
  });

  it('sends a prompt cached nowhere to the replica with the least prefill queued, before the one with fewer requests in flight', () => {
    const b = new CacheAware();
    // r-1: one prompt mid-prefill (picked, no first byte yet); r-2: two streams past their prefill, decoding.
    b.pick(targets, none, only('r-1'), req(50));
    const inFlight = (id: string) => (id === 'r-1' ? 1 : 2);
    // Flow control lets a request go when r-2's prefill ends: it must start there, not wait behind r-1's.
    expect(b.pick(targets, inFlight, only('r-1', 'r-2'), req(51))?.replicaId).toBe('r-2');
  });

  it('drops the affinity at once when the replica holding the prompt is not eligible (cooling down, failed)', async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    const first = serve(b, req(1));
    const next = serve(b, req(1, 'again'), (id) => id !== first);
    expect(next).not.toBe(first);
    expect(await decisions(metrics)).toContain(`replica="${next}",decision="broke_unavailable"} 1`);
  });

  it('keeps affinity while the sticky replica is busier by less than the prefill it saves', () => {
    const b = new CacheAware();
    expect(serve(b, req(1), only('r-1'))).toBe('r-1');
    // A distinct prompt half as long in flight on r-1: less than the prefill of group 1 elsewhere.
    b.pick(targets, none, only('r-1'), { model: 'm', body: { prompt: system(99).slice(0, 1100) } });
    expect(b.pick(targets, none, all, req(1, 'still here'))?.replicaId).toBe('r-1');
  });

  it('breaks affinity (the valve) when the sticky replica would be slower than another by more than a cold prefill there', async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    expect(serve(b, req(1), only('r-1'))).toBe('r-1');
    // Three distinct prompts in flight on r-1: its queue is longer than two whole prefills of group 1 elsewhere.
    for (const g of [97, 98, 99]) b.pick(targets, none, only('r-1'), req(g));
    const t = b.pick(targets, none, all, req(1, 'hot'))!;
    expect(t.replicaId).not.toBe('r-1');
    expect(await decisions(metrics)).toContain(`replica="${t.replicaId}",decision="broke_saturated"} 1`);
  });

  it('releases in-flight uncached tokens when the attempt ends, so affinity comes back', () => {
    const b = new CacheAware();
    serve(b, req(1), only('r-1'));
    const queued = [97, 98, 99].map((g) => req(g));
    const picked = queued.map((r) => b.pick(targets, none, only('r-1'), r)!);
    queued.forEach((r, i) => b.ended(r, picked[i]!, { answered: true }));
    expect(b.pick(targets, none, all, req(1, 'after'))?.replicaId).toBe('r-1');
  });

  it('decays a replica whose engine reports fewer cached tokens than predicted, and counts both', async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    serve(b, req(1), only('r-1'));
    serve(b, req(2), only('r-1'));
    // Group 2 predicted whole, but the engine had evicted it: r-1's older entries go too.
    serve(b, req(2, 'evicted?'), all, 0);
    serve(b, req(1, 'and group 1?'));
    // Group 1, learned before the misprediction, is no longer believed cached on r-1.
    expect(await count(metrics, 'kept')).toBe(1);
    expect(await count(metrics, 'no_affinity')).toBe(3);
    const text = await metrics.registry.getSingleMetricAsString('llmgw_routing_cached_tokens_total');
    expect(text).toMatch(/replica="r-1",source="predicted"} [1-9]/);
    expect(text).toContain('replica="r-1",source="reported"} 0');
  });

  it('does not decay when the engine reports what was predicted', async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    serve(b, req(1), only('r-1'));
    serve(b, req(2), only('r-1'));
    serve(b, req(2, 'cached'), all, 590);
    serve(b, req(1, 'and group 1?'));
    expect(await count(metrics, 'kept')).toBe(2);
  });

  it("sizes a replica's index from the capacity its engine reports", async () => {
    const metrics = new Metrics();
    const b = new CacheAware({}, metrics);
    const groups = Array.from({ length: 12 }, (_, g) => req(g));
    // Each group is ~600 tokens; an engine holding 2,400 tokens keeps about four.
    for (const r of groups) {
      const t = b.pick(targets, none, only('r-1'), r)!;
      b.ended(r, t, { answered: true, prefixCacheTokens: 2400 });
    }
    b.pick(targets, none, all, req(0, 'first again'));
    expect(await count(metrics, 'no_affinity')).toBe(13);
    const big = new CacheAware();
    for (const r of groups.map((_, g) => req(g))) {
      const t = big.pick(targets, none, only('r-1'), r)!;
      big.ended(r, t, { answered: true, prefixCacheTokens: 500_000 });
    }
    expect(big.pick(targets, none, all, req(0, 'first again'))?.replicaId).toBe('r-1');
  });

  it('forgets replicas that are not ready any more', () => {
    const b = new CacheAware();
    serve(b, req(1), only('r-1'));
    expect(b.entries).toBeGreaterThan(0);
    b.retain(new Set(['r-2', 'r-3']));
    expect(b.entries).toBe(0);
  });

  it('routes requests without routing text (embeddings) least-loaded', () => {
    const b = new CacheAware();
    const r: Routed = { model: 'm', body: { input: 'x' } };
    expect(b.pick(targets, (id) => (id === 'r-2' ? 0 : 3), all, r)?.replicaId).toBe('r-2');
    expect(b.entries).toBe(0);
  });
});
