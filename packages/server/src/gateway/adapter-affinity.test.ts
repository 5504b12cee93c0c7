import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { RouteTarget } from '../controller/controller.js';
import { AdapterAffinity, SPREAD_AFTER } from './adapter-affinity.js';
import { LeastLoaded } from './balancer.js';
import { CacheAware } from './cache-aware.js';
import { Metrics } from '../metrics.js';

const targets = (n: number): RouteTarget[] => Array.from({ length: n }, (_, i) => ({ replicaId: `r-${i + 1}`, endpoint: `http://e${i}`, apiKey: 'k' }));

function affinity(slots = 2, prefer = true) {
  const log: string[] = [];
  const a = new AdapterAffinity(
    new LeastLoaded(() => 0.99),
    'base',
    { loaded: (m, x) => log.push(`load ${m}/${x}`), unloaded: (m, x) => log.push(`unload ${m}/${x}`) },
    () => slots,
    prefer,
  );
  return { a, log };
}
const idle = () => 0;
const all = () => true;
const ask = (
  a: AdapterAffinity,
  t: RouteTarget[],
  adapter: string | undefined,
  inFlight: (id: string) => number = idle,
  eligible: (id: string) => boolean = all,
) => a.pick(t, inFlight, eligible, { model: adapter ?? 'base', body: {}, ...(adapter ? { adapter } : {}) })?.replicaId;

describe('AdapterAffinity', () => {
  it('sends an adapter back where it is loaded, and counts a load only the first time', () => {
    const { a, log } = affinity();
    const t = targets(2);
    const first = ask(a, t, 'sql');
    expect(ask(a, t, 'sql')).toBe(first);
    expect(ask(a, t, 'sql')).toBe(first);
    expect(log).toEqual(['load base/sql']);
    expect(a.loaded(first!)).toEqual(['sql']);
  });

  it('prefers a free slot, then evicts the replica whose least recently used slot is the oldest', () => {
    const { a, log } = affinity(1);
    const t = targets(2);
    const r1 = ask(a, t, 'a');
    const r2 = ask(a, t, 'b');
    expect(r2).not.toBe(r1);
    // Both full: "a" was used longest ago, so its replica loads "c".
    expect(ask(a, t, 'c')).toBe(r1);
    expect(log).toEqual(['load base/a', 'load base/b', 'load base/c', 'unload base/a']);
    expect(a.loaded(r1!)).toEqual(['c']);
  });

  it('spreads a hot adapter to another replica once its holder is SPREAD_AFTER requests busier', () => {
    const { a } = affinity();
    const t = targets(2);
    const holder = ask(a, t, 'hot')!;
    const busy = (n: number) => (id: string) => (id === holder ? n : 0);
    expect(ask(a, t, 'hot', busy(SPREAD_AFTER - 1))).toBe(holder);
    const other = ask(a, t, 'hot', busy(SPREAD_AFTER));
    expect(other).not.toBe(holder);
    expect(a.loaded(other!)).toEqual(['hot']);
  });

  it('leaves requests without an adapter to the model balancer, and skips ineligible replicas', () => {
    const { a, log } = affinity();
    const t = targets(2);
    expect(ask(a, t, undefined, (id) => (id === 'r-1' ? 3 : 0))).toBe('r-2');
    expect(log).toEqual([]);
    expect(ask(a, t, 'x', idle, (id) => id === 'r-2')).toBe('r-2');
    expect(ask(a, t, 'x', idle, () => false)).toBeUndefined();
  });

  it('with adapter_routing none, leaves every pick to the model balancer and still counts the loads it causes', () => {
    const { a, log } = affinity(1, false);
    const t = targets(2);
    // LeastLoaded: the idle replica, whatever either holds; r-2 is busier, so r-1 each time.
    const busy = (id: string) => (id === 'r-2' ? 1 : 0);
    expect(ask(a, t, 'a', busy)).toBe('r-1');
    expect(ask(a, t, 'b', busy)).toBe('r-1');
    expect(ask(a, t, 'a', busy)).toBe('r-1');
    expect(log).toEqual(['load base/a', 'load base/b', 'unload base/a', 'load base/a', 'unload base/b']);
    // With affinity, "a" would have gone to the free slot on r-2 and stayed there.
    const on = affinity(1).a;
    expect([ask(on, t, 'a', busy), ask(on, t, 'b', busy), ask(on, t, 'a', busy)]).toEqual(['r-1', 'r-2', 'r-1']);
  });

  it('forgets a replica that is not ready any more', () => {
    const { a } = affinity();
    const t = targets(1);
    ask(a, t, 'sql');
    a.retain(new Set());
    expect(a.loaded('r-1')).toEqual([]);
  });

  it('never holds more adapters on a replica than its slots, and every pick is an eligible replica', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.integer({ min: 0, max: 11 }), { maxLength: 200 }),
        (slots, n, asks) => {
          const { a, log } = affinity(slots);
          const t = targets(n);
          for (const x of asks) {
            const id = ask(a, t, `a${x}`);
            expect(id).toBeDefined();
            expect(a.loaded(id!)).toContain(`a${x}`);
            for (const r of t) expect(a.loaded(r.replicaId).length).toBeLessThanOrEqual(slots);
          }
          const loads = log.filter((l) => l.startsWith('load')).length;
          const unloads = log.length - loads;
          const held = t.reduce((s, r) => s + a.loaded(r.replicaId).length, 0);
          expect(loads - unloads).toBe(held);
        },
      ),
    );
  });

  it('keys the prefix index on (adapter, prompt): a prompt cached under one adapter is no affinity for another', async () => {
    const metrics = new Metrics();
    const a = new AdapterAffinity(new CacheAware({}, metrics), 'base', { loaded: () => {}, unloaded: () => {} }, () => 8);
    const t = targets(2);
    const body = { messages: [{ role: 'system', content: 'A long shared system prompt for every team. '.repeat(40) }] };
    const serve = (adapter: string) => {
      const r = { model: adapter, body, adapter };
      const target = a.pick(t, idle, all, r)!;
      a.ended(r, target, { answered: true });
      return target.replicaId;
    };
    serve('sql');
    serve('sql');
    serve('law');
    const { values } = await metrics.routingDecisions.get();
    const of = (model: string, decision: string) => values.filter((v) => v.labels.model === model && v.labels.decision === decision).length;
    // sql's second request found its prefix; law's first, the same prompt, found none of its own.
    expect(of('sql', 'kept')).toBe(1);
    expect(of('law', 'no_affinity')).toBe(1);
    expect(of('law', 'kept')).toBe(0);
  });
});
