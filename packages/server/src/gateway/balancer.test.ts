import { describe, expect, it } from '@jest/globals';
import type { RouteTarget } from '../controller/controller.js';
import { LeastLoaded } from './balancer.js';

const targets: RouteTarget[] = ['r-1', 'r-2', 'r-3'].map((replicaId) => ({ replicaId, endpoint: `http://${replicaId}`, apiKey: 'k' }));
const loads = (m: Record<string, number>) => (id: string) => m[id] ?? 0;
const all = () => true;

describe('LeastLoaded', () => {
  it('picks the replica with the fewest requests in flight', () => {
    expect(new LeastLoaded().pick(targets, loads({ 'r-1': 3, 'r-2': 1, 'r-3': 2 }), all)?.replicaId).toBe('r-2');
  });

  it('skips replicas that are not eligible, however idle', () => {
    const pick = new LeastLoaded().pick(targets, loads({ 'r-1': 0, 'r-2': 5, 'r-3': 4 }), (id) => id !== 'r-1');
    expect(pick?.replicaId).toBe('r-3');
  });

  it('returns undefined when no replica is eligible', () => {
    expect(new LeastLoaded().pick(targets, loads({}), () => false)).toBeUndefined();
  });

  it('spreads ties over every tied replica', () => {
    // The random source decides each reservoir step: always "replace" lands on the last tie, never on the first.
    expect(new LeastLoaded(() => 0).pick(targets, loads({ 'r-2': 1 }), all)?.replicaId).toBe('r-3');
    expect(new LeastLoaded(() => 0.99).pick(targets, loads({ 'r-2': 1 }), all)?.replicaId).toBe('r-1');
    const seen = new Set<string>();
    const b = new LeastLoaded();
    for (let i = 0; i < 200; i++) seen.add(b.pick(targets, loads({}), all)!.replicaId);
    expect([...seen].sort()).toEqual(['r-1', 'r-2', 'r-3']);
  });
});
