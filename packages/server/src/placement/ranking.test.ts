import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Profile } from '@llmgw/shared';
import type { NodeSnapshot } from '../snapshot.js';
import { prepareFleet, rankIds, viewOf, type Fleet, type ProfileView } from './fleet.js';
import { orderAgainst, POOL_RANKING, RANKING, rankValues, type RankInputs } from './ranking.js';
import { fitsNow, pickSingle, type Context } from './select.js';
import { pickSharded } from './sharded.js';
import { makeGpu, makeNode } from '../../test/factories.js';

/**
 * The selection rule as `RANKING` runs it against the rule as it was written out before
 * (issue 25): field by field, in the pick loops' own order. The reference below is that
 * old comparator and the old pool score, kept here as the specification.
 */

const FILE = 'a'.repeat(64);

/** The old `Candidate`'s fields, read straight from the view and the context. */
interface Ref {
  c: number;
  id: string;
  avoid: number;
  existing: number;
  pack: number;
  mem: number;
  cached: number;
}

function refOf(fleet: Fleet, view: ProfileView, ctx: Context, c: number): Ref {
  const node = fleet.nodes[view.cand[c]!]!;
  return {
    c,
    id: node.id,
    avoid: ctx.avoid?.has(node.id) === true ? 1 : 0,
    existing: ctx.existing !== undefined ? (ctx.existing.get(node.id) ?? 0) : (ctx.counts?.[view.cand[c]!] ?? 0),
    pack: view.pack[c]!,
    mem: view.mem[c]!,
    cached: ctx.file === undefined || node.files?.has(ctx.file) === true ? 0 : 1,
  };
}

/** The old `before`, verbatim. */
function refBefore(a: Ref, b: Ref): boolean {
  if (a.avoid !== b.avoid) return a.avoid < b.avoid;
  if (a.existing !== b.existing) return a.existing < b.existing;
  if (a.pack !== b.pack) return a.pack < b.pack;
  if (a.mem !== b.mem) return a.mem < b.mem;
  if (a.cached !== b.cached) return a.cached < b.cached;
  return a.id < b.id;
}

function fitting(fleet: Fleet, view: ProfileView, ctx: Context, from = 0, to = view.cand.length): Ref[] {
  const out: Ref[] = [];
  for (let c = from; c < to; c++) if (fitsNow(view, c)) out.push(refOf(fleet, view, ctx, c));
  return out;
}

/** The old pickSharded: each pool's first n by `refBefore`, pools by their score, then name. */
function refSharded(fleet: Fleet, view: ProfileView, ctx: Context): { pool: string; cs: number[] } | undefined {
  const n = view.req.shards;
  let best: { pool: string; cs: number[]; score: number[] } | undefined;
  view.poolName.forEach((pool, p) => {
    const all = fitting(fleet, view, ctx, view.poolStart[p], view.poolStart[p + 1]);
    if (all.length < n) return;
    const top = all.sort((a, b) => (refBefore(a, b) ? -1 : 1)).slice(0, n);
    const sum = (f: (r: Ref) => number) => top.reduce((s, r) => s + f(r), 0);
    const score = [sum((r) => r.avoid), sum((r) => r.existing), all.length, sum((r) => r.pack)];
    const i = best === undefined ? -1 : score.findIndex((x, k) => x !== best!.score[k]);
    const wins = best === undefined || (i >= 0 ? score[i]! < best.score[i]! : pool < best.pool);
    if (wins) best = { pool, cs: top.map((r) => r.c), score };
  });
  return best && { pool: best.pool, cs: best.cs };
}

/** Small crowded fleets: few distinct figures, so every key gets to break ties. */
const fleetArb = fc.integer({ min: 1, max: 14 }).chain((count) =>
  fc.tuple(
    // A shuffle of the ids, so node order and id order differ.
    fc.shuffledSubarray(
      Array.from({ length: count }, (_, i) => `node-${String(i).padStart(2, '0')}`),
      { minLength: count, maxLength: count },
    ),
    fc.array(
      fc.record({
        gpus: fc.integer({ min: 0, max: 3 }),
        memGb: fc.constantFrom<number | undefined>(16, 32, 32, 64, undefined),
        pool: fc.constantFrom<string | undefined>('rack-a', 'rack-b', undefined),
        cached: fc.boolean(),
        avoid: fc.integer({ min: 0, max: 3 }).map((x) => x === 0),
        existing: fc.integer({ min: 0, max: 2 }),
      }),
      { minLength: count, maxLength: count },
    ),
  ),
);

const ctxArb = fc.record({
  useAvoid: fc.boolean(),
  spread: fc.constantFrom('map', 'counts', 'none'),
  file: fc.boolean(),
  ranked: fc.boolean(),
  gpus: fc.integer({ min: 0, max: 2 }),
  memGb: fc.constantFrom(0, 8, 24),
});

function setUp(
  [ids, specs]: [string[], { gpus: number; memGb: number | undefined; pool: string | undefined; cached: boolean; avoid: boolean; existing: number }[]],
  o: { useAvoid: boolean; spread: string; file: boolean; ranked: boolean },
) {
  const nodes: NodeSnapshot[] = specs.map((s, i) => {
    const id = ids[i]!;
    return makeNode({
      id,
      pool: s.pool,
      memoryTotalMb: s.memGb === undefined ? undefined : s.memGb * 1024,
      gpus: Array.from({ length: s.gpus }, (_, g) => makeGpu({ index: g, uuid: `${id}-gpu-${g}` })),
      fabrics: ['infiniband', 'ethernet'],
      files: s.cached ? new Set([FILE]) : undefined,
    });
  });
  const fleet = prepareFleet(nodes);
  if (o.ranked) fleet.idRank = rankIds(nodes);
  const ctx: Context = {
    avoid: o.useAvoid ? new Set(nodes.filter((_, i) => specs[i]!.avoid).map((n) => n.id)) : undefined,
    existing: o.spread === 'map' ? new Map(nodes.map((n, i) => [n.id, specs[i]!.existing])) : undefined,
    counts: o.spread === 'counts' ? Int32Array.from(specs, (s) => s.existing) : undefined,
    file: o.file ? FILE : undefined,
  };
  return { fleet, ctx };
}

describe('RANKING (the selection rule, declared once)', () => {
  it('lists its keys in the documented order, each with a direction', () => {
    expect(RANKING.map((k) => `${k.name} ${k.prefer}`)).toEqual(['avoid lowest', 'existing lowest', 'pack lowest', 'mem lowest', 'cached lowest', 'id lowest']);
    expect(POOL_RANKING.map((k) => `${k.name} ${k.prefer}`)).toEqual(['avoided lowest', 'spread lowest', 'fit lowest', 'pack lowest']);
  });

  // Two candidates equal on every key before `k`: the one lower on `k` goes first, even
  // though it is higher on every key after `k`.
  it.each(RANKING.map((key, k) => [key.name, k] as const))('%s breaks the tie the keys before it leave', (_name, k) => {
    // Figures per candidate, in RANKING's order: 0 for the one that should go first (a).
    const fig = (j: number, a: boolean): number => (j < k ? 1 : j === k ? (a ? 0 : 1) : a ? 1 : 0);
    const ids = ['node-a', 'node-b'];
    const r: RankInputs = {
      nodes: ids.map((id, i) => makeNode({ id, files: fig(4, i === 0) === 0 ? new Set([FILE]) : undefined })),
      cand: Int32Array.of(0, 1),
      pack: Int32Array.of(fig(2, true), fig(2, false)),
      mem: Float64Array.of(fig(3, true), fig(3, false)),
      idRank: Int32Array.of(fig(5, true), fig(5, false)),
      avoid: new Set(ids.filter((_, i) => fig(0, i === 0) === 1)),
      existing: undefined,
      counts: Int32Array.of(fig(1, true), fig(1, false)),
      file: FILE,
    };
    const keysOf = (c: number): Float64Array => {
      const out = new Float64Array(RANKING.length);
      rankValues(r, c, out);
      return out;
    };
    expect(Array.from(keysOf(0))).toEqual(RANKING.map((_, j) => fig(j, true)));
    expect(orderAgainst(r, 0, keysOf(1))).toBe(-1);
    expect(orderAgainst(r, 1, keysOf(0))).toBe(1);
  });

  it('picks the node the old comparator picks, on random fleets and contexts', () => {
    fc.assert(
      fc.property(fleetArb, ctxArb, (fleetSpec, o) => {
        const { fleet, ctx } = setUp(fleetSpec, o);
        const profile: Profile = { name: 'p', engine: 'vllm', gpus: o.gpus, min_memory_gb: o.memGb };
        const view = viewOf(fleet, profile);
        const all = fitting(fleet, view, ctx);
        const want = all.reduce<Ref | undefined>((b, x) => (b === undefined || refBefore(x, b) ? x : b), undefined);
        const found = pickSingle(fleet, view, ctx);
        expect(found.fit).toBe(all.length);
        expect(found.chosen?.map((c) => c.c)).toEqual(want && [want.c]);
      }),
      { numRuns: 300 },
    );
  });

  it('gives a sharded replica the pool and the nodes the old rule gives', () => {
    fc.assert(
      fc.property(fleetArb, ctxArb, fc.integer({ min: 2, max: 3 }), (fleetSpec, o, shards) => {
        const { fleet, ctx } = setUp(fleetSpec, o);
        const profile: Profile = { name: 'p', engine: 'vllm', gpus: Math.max(1, o.gpus), min_memory_gb: o.memGb, shards, fabric: 'infiniband' };
        const view = viewOf(fleet, profile);
        const want = refSharded(fleet, view, ctx);
        const found = pickSharded(fleet, view, ctx);
        expect(found.fit).toBe(fitting(fleet, view, ctx).length);
        expect(found.pool).toBe(want?.pool);
        expect(found.chosen?.map((c) => c.c)).toEqual(want?.cs);
      }),
      { numRuns: 300 },
    );
  });
});
