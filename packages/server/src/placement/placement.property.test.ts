import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { GpuReport, Model, Profile } from '@llmgw/shared';
import { DEFAULT_POOL, place, placeMany, type PlacementRequest } from './index.js';
import type { NodeSnapshot, Placement, PlacementOutcome, Reservation } from '../snapshot.js';
import { makeGpu, makeModel, makeNode, makeProfile } from '../../test/factories.js';

/**
 * Invariants of placement over random fleets and random catalogs. The fleets are small
 * and crowded on purpose: conflicts (shared GPUs, full nodes, short pools) are what the
 * properties are about.
 */

const GB = 1024;
const RUNS = { numRuns: 150 };

const gpuArb = (nodeId: string, index: number): fc.Arbitrary<GpuReport> =>
  fc
    .record({
      kind: fc.constantFrom('H100-80GB', 'H100-80GB', 'RTX-4090', 'L40S'),
      memory: fc.constantFrom<number | undefined>(81920, 24564, 49152, undefined),
      sick: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
      lostUuid: fc.integer({ min: 0, max: 19 }).map((n) => n === 0),
    })
    .map(({ kind, memory, sick, lostUuid }) =>
      makeGpu({
        index,
        uuid: lostUuid ? undefined : `${nodeId}-gpu-${index}`,
        class: kind,
        memory_total_mb: memory,
        problems: sick ? ['fell off the bus (Xid 79)'] : [],
      }),
    );

const nodeArb = (id: string): fc.Arbitrary<NodeSnapshot> =>
  fc
    .record({
      pool: fc.constantFrom<string | undefined>('rack-a', 'rack-b', undefined),
      role: fc.constantFrom<string | undefined>('coding', 'coding', 'batch', undefined),
      admin: fc.constantFrom<NodeSnapshot['admin']>('ready', 'ready', 'ready', 'ready', 'ready', 'cordoned', 'draining'),
      liveness: fc.constantFrom<NodeSnapshot['liveness']>('ready', 'ready', 'ready', 'ready', 'ready', 'not-ready', 'lost'),
      memoryGb: fc.constantFrom<number | undefined>(undefined, 8, 16, 32, 64, 256),
      gpuCount: fc.integer({ min: 0, max: 4 }),
      fabrics: fc.constantFrom<string[]>(['infiniband', 'ethernet'], ['infiniband'], ['infiniband', 'ethernet'], ['ethernet'], []),
    })
    .chain((n) =>
      fc.tuple(...Array.from({ length: n.gpuCount }, (_, i) => gpuArb(id, i))).map((gpus) =>
        makeNode({
          id,
          pool: n.pool,
          labels: n.role ? { role: n.role } : {},
          admin: n.admin,
          liveness: n.liveness,
          lastSeenAgoS: n.liveness === 'ready' ? 3 : 60,
          memoryTotalMb: n.memoryGb === undefined ? undefined : n.memoryGb * GB,
          gpus,
          fabrics: n.fabrics,
        }),
      ),
    );

const fleetArb: fc.Arbitrary<NodeSnapshot[]> = fc
  .integer({ min: 1, max: 12 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => nodeArb(`node-${i}`))));

const profileArb = (name: string): fc.Arbitrary<Profile> =>
  fc
    .record({
      gpus: fc.constantFrom(0, 0, 1, 1, 2, 4),
      gpuClass: fc.constantFrom<string[] | undefined>(undefined, ['H100'], ['RTX', 'L40S']),
      gpuMem: fc.constantFrom<number | undefined>(undefined, 40),
      mem: fc.constantFrom<number | undefined>(undefined, 0, 8, 24, 48),
      shards: fc.constantFrom(1, 1, 2, 2, 3),
      fabric: fc.constantFrom<string | undefined>(undefined, 'infiniband'),
      role: fc.constantFrom<string | undefined>(undefined, undefined, 'coding'),
    })
    .map((p) =>
      makeProfile({
        name,
        gpus: p.gpus,
        gpu_class: p.gpuClass,
        min_gpu_memory_gb: p.gpuMem,
        min_memory_gb: p.mem,
        shards: p.shards,
        fabric: p.fabric,
        node_selector: p.role ? { role: p.role } : undefined,
      }),
    );

const modelArb = (name: string): fc.Arbitrary<Model> =>
  fc.tuple(profileArb('first'), fc.option(profileArb('second'), { nil: undefined })).map(([a, b]) => makeModel({ name, profiles: b ? [a, b] : [a] }));

const catalogArb = fc.tuple(modelArb('m-a'), modelArb('m-b'), modelArb('m-c'));

/** A fleet and a queue of replicas to place one after another. */
const scenarioArb = fc.record({
  nodes: fleetArb,
  models: catalogArb,
  picks: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 8 }),
});

function requestsOf(models: Model[], picks: number[]): PlacementRequest[] {
  return picks.map((p, i) => ({ model: models[p]!, replicaId: `r${i}` }));
}

function labelsMatch(node: NodeSnapshot, profile: Profile): boolean {
  return Object.entries(profile.node_selector ?? {}).every(([k, v]) => node.labels[k] === v);
}

function placements(outcomes: PlacementOutcome[]): Placement[] {
  return outcomes.flatMap((o) => (o.placement ? [o.placement] : []));
}

describe('placement properties', () => {
  it('never reserves more GPUs or memory on a node than it has, nor a GPU twice', () => {
    fc.assert(
      fc.property(scenarioArb, ({ nodes, models, picks }) => {
        const { reservations } = placeMany({ nodes, reservations: [], requests: requestsOf(models, picks) });
        const byId = new Map(nodes.map((n) => [n.id, n]));
        const seen = new Set<string>();
        const memory = new Map<string, number>();
        for (const r of reservations) {
          const node = byId.get(r.nodeId);
          expect(node).toBeDefined();
          memory.set(r.nodeId, (memory.get(r.nodeId) ?? 0) + r.memoryMb);
          for (const uuid of r.gpuUuids) {
            expect(seen.has(uuid)).toBe(false);
            seen.add(uuid);
            const gpu = node?.gpus.find((g) => g.uuid === uuid);
            expect(gpu?.problems).toEqual([]);
          }
        }
        for (const [id, mb] of memory) {
          const total = byId.get(id)?.memoryTotalMb;
          if (total !== undefined) expect(mb).toBeLessThanOrEqual(total);
        }
      }),
      RUNS,
    );
  });

  it('places only on ready, live nodes whose labels, GPUs and fabric match', () => {
    fc.assert(
      fc.property(scenarioArb, ({ nodes, models, picks }) => {
        const { outcomes } = placeMany({ nodes, reservations: [], requests: requestsOf(models, picks) });
        const byId = new Map(nodes.map((n) => [n.id, n]));
        for (const p of placements(outcomes)) {
          const shards = p.profile.shards ?? 1;
          expect(p.shards).toHaveLength(shards);
          expect(new Set(p.shards.map((s) => s.nodeId)).size).toBe(shards);
          expect(p.shards.map((s) => s.rank)).toEqual(p.shards.map((_, i) => i));
          const pools = new Set<string>();
          for (const s of p.shards) {
            const node = byId.get(s.nodeId) as NodeSnapshot;
            expect(node.liveness).toBe('ready');
            expect(node.admin).toBe('ready');
            expect(labelsMatch(node, p.profile)).toBe(true);
            expect(s.gpuUuids).toHaveLength(p.profile.gpus ?? 0);
            for (const uuid of s.gpuUuids) {
              const gpu = node.gpus.find((g) => g.uuid === uuid) as GpuReport;
              const classes = p.profile.gpu_class ?? [];
              if (classes.length > 0) {
                expect(classes.some((c) => gpu.class.toLowerCase().startsWith(c.toLowerCase()))).toBe(true);
              }
            }
            pools.add(node.pool ?? DEFAULT_POOL);
            if (shards > 1 && p.profile.fabric) expect(node.fabrics).toContain(p.profile.fabric);
          }
          if (shards > 1) {
            expect(pools.size).toBe(1);
            expect(p.pool).toBe([...pools][0]);
          }
        }
      }),
      RUNS,
    );
  });

  it('gives every node at least one reason when a replica cannot be placed', () => {
    fc.assert(
      fc.property(fleetArb, modelArb('m'), (nodes, model) => {
        const out = place({ model, nodes, reservations: [] });
        if (out.placement !== undefined) return;
        for (const profile of model.profiles) {
          const mine = out.rejections.filter((r) => r.profile === profile.name);
          const poolsShort = new Set(mine.filter((r) => r.code === 'shards').map((r) => r.pool));
          for (const node of nodes) {
            const hasReason = mine.some((r) => r.node === node.id);
            // A node that fits a sharded profile is explained by its pool being short.
            const pooled = (profile.shards ?? 1) > 1 && poolsShort.has(node.pool ?? DEFAULT_POOL);
            expect(hasReason || pooled).toBe(true);
          }
        }
        // Each node counted once: the reason counts add up to the nodes that do not fit
        // the profile the summary speaks of (the one most nodes fit), a node fitting
        // when it has no reason of its own.
        const fitting = model.profiles.map((profile) => nodes.filter((n) => !out.rejections.some((r) => r.profile === profile.name && r.node === n.id)).length);
        const fit = Math.max(...fitting);
        const counted = out.reasons.reduce((sum, r) => sum + r.count, 0);
        expect(counted).toBe(nodes.length - fit);
      }),
      RUNS,
    );
  });

  it('explains every node not chosen, and the explanation agrees with the decision', () => {
    fc.assert(
      fc.property(fleetArb, profileArb('only'), (nodes, profile) => {
        fc.pre((profile.shards ?? 1) === 1);
        const model = makeModel({ profiles: [profile] });
        const out = place({ model, nodes, reservations: [], explainWinner: true });
        const chosen = new Set(out.placement?.shards.map((s) => s.nodeId) ?? []);
        for (const node of nodes) {
          if (chosen.has(node.id)) {
            expect(out.rejections.some((r) => r.node === node.id)).toBe(false);
            continue;
          }
          const rejected = out.rejections.some((r) => r.node === node.id);
          // A node with no reason must really fit on its own.
          const alone = place({ model, nodes: [node], reservations: [] });
          expect(rejected).toBe(alone.placement === undefined);
        }
      }),
      RUNS,
    );
  });

  it('decides the same whatever the order of the inventory', () => {
    fc.assert(
      fc.property(scenarioArb, fc.integer(), ({ nodes, models, picks }, seed) => {
        const shuffled = [...nodes].sort((a, b) => hash(a.id, seed) - hash(b.id, seed));
        const requests = requestsOf(models, picks);
        const a = placeMany({ nodes, reservations: [], requests });
        const b = placeMany({ nodes: shuffled, reservations: [], requests });
        expect(b.reservations).toEqual(a.reservations);
      }),
      RUNS,
    );
  });

  it('accumulates reservations: placing one by one equals placing in a batch, explanations too', () => {
    fc.assert(
      fc.property(scenarioArb, ({ nodes, models, picks }) => {
        const requests = requestsOf(models, picks);
        const batch = placeMany({ nodes, reservations: [], requests });
        let held: Reservation[] = [];
        for (const [i, r] of requests.entries()) {
          const out = place({ model: r.model, nodes, reservations: held });
          expect(out).toEqual(batch.outcomes[i]);
          if (out.placement) {
            held = [...held, ...batch.reservations.filter((x) => x.replicaId === r.replicaId)];
          }
        }
      }),
      { numRuns: 100 },
    );
  });
});

function hash(s: string, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 2654435761);
  return h >>> 0;
}
