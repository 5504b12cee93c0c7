import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Model } from '@llmgw/shared';
import { placeMany, placeOnFleet, prepareFleet, reservationsFor, reserve, type PlacementRequest } from './index.js';
import type { NodeSnapshot, PlacementOutcome } from '../snapshot.js';
import { buildTree, updateTree } from './best.js';
import { rankValues, valuesOrder, type RankInputs } from './ranking.js';
import { makeGpu, makeModel, makeNode, makeProfile } from '../../test/factories.js';

/**
 * The kept answers (best.ts: a tree per single-shard view, a scan per pool of a sharded
 * one) against the scan they stand for, over random fleets: the same node, the same
 * figures, the same count of fitting nodes, after any sequence of changes.
 */

describe('BestTree', () => {
  it('keeps at its root the candidate a scan by RANKING picks, and counts the fitting ones', () => {
    const scenario = fc.integer({ min: 1, max: 40 }).chain((n) =>
      fc.record({
        pack: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: n, maxLength: n }),
        mem: fc.array(fc.constantFrom(0, 8, 16, 16, 64, Infinity), { minLength: n, maxLength: n }),
        counts: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: n, maxLength: n }),
        order: fc.shuffledSubarray(
          Array.from({ length: n }, (_, i) => i),
          { minLength: n, maxLength: n },
        ),
        needs: fc.record({ mem: fc.constantFrom(-Infinity, 8, 16), pack: fc.constantFrom(-Infinity, 1, 2) }),
        changes: fc.array(fc.record({ c: fc.nat(n - 1), what: fc.nat(2), by: fc.integer({ min: 1, max: 8 }) }), { maxLength: 30 }),
      }),
    );
    fc.assert(
      fc.property(scenario, (s) => {
        const n = s.pack.length;
        const r: RankInputs = {
          nodes: Array.from({ length: n }, (_, i) => makeNode({ id: `node-${i}` })),
          cand: Int32Array.from({ length: n }, (_, i) => i),
          pack: Int32Array.from(s.pack),
          mem: Float64Array.from(s.mem),
          idRank: Int32Array.from(s.order),
          avoid: undefined,
          existing: undefined,
          counts: Int32Array.from(s.counts),
          file: undefined,
        };
        const tree = buildTree(r, s.needs.mem, s.needs.pack, [], new Float64Array(0));
        const expectScan = (): void => {
          const figures = (c: number): Float64Array => {
            const out = new Float64Array(6);
            rankValues(r, c, out);
            return out;
          };
          let best = -1;
          let fit = 0;
          for (let c = 0; c < n; c++) {
            if (r.mem[c]! < s.needs.mem || r.pack[c]! < s.needs.pack) continue;
            fit++;
            if (best < 0 || valuesOrder(figures(c), figures(best)) < 0) best = c;
          }
          expect(tree.win[1]).toBe(best);
          expect(tree.fit).toBe(fit);
        };
        expectScan();
        for (const change of s.changes) {
          if (change.what === 0) r.pack[change.c] = Math.max(0, r.pack[change.c]! - 1);
          else if (change.what === 1) r.mem[change.c] = r.mem[change.c]! - change.by;
          else r.counts![change.c] = r.counts![change.c]! + 1;
          updateTree(tree, change.c);
          expectScan();
        }
      }),
      { numRuns: 300 },
    );
  });
});

const GB = 1024;

const nodeArb = (id: string): fc.Arbitrary<NodeSnapshot> =>
  fc
    .record({
      pool: fc.constantFrom<string | undefined>('rack-a', 'rack-b', 'rack-c', undefined),
      memoryGb: fc.constantFrom<number | undefined>(undefined, 16, 32, 64, 256),
      gpus: fc.integer({ min: 0, max: 4 }),
      kind: fc.constantFrom('H100', 'RTX-4090'),
      cordoned: fc.integer({ min: 0, max: 9 }).map((x) => x === 0),
    })
    .map((n) =>
      makeNode({
        id,
        pool: n.pool,
        admin: n.cordoned ? 'cordoned' : 'ready',
        memoryTotalMb: n.memoryGb === undefined ? undefined : n.memoryGb * GB,
        gpus: Array.from({ length: n.gpus }, (_, index) => makeGpu({ index, uuid: `${id}-gpu-${index}`, class: n.kind })),
        fabrics: ['infiniband'],
      }),
    );

const modelArb = (name: string): fc.Arbitrary<Model> =>
  fc
    .record({
      gpus: fc.constantFrom(0, 1, 2),
      mem: fc.constantFrom<number | undefined>(undefined, 8, 24),
      shards: fc.constantFrom(1, 1, 2, 3),
      cls: fc.constantFrom<string[] | undefined>(undefined, ['H100']),
    })
    .map((p) =>
      makeModel({
        name,
        profiles: [
          makeProfile({ name: 'p', gpus: p.gpus, min_memory_gb: p.mem, shards: p.shards, gpu_class: p.cls, fabric: p.shards > 1 ? 'infiniband' : undefined }),
        ],
      }),
    );

describe('kept answers in placeMany', () => {
  it('decide as a scan does: the same outcomes as decisions that cannot use them', () => {
    const scenario = fc.record({
      nodes: fc.integer({ min: 1, max: 40 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => nodeArb(`node-${String(i).padStart(2, '0')}`)))),
      models: fc.tuple(modelArb('m-a'), modelArb('m-b'), modelArb('m-c')),
      picks: fc.array(fc.nat(2), { minLength: 1, maxLength: 40 }),
    });
    fc.assert(
      fc.property(scenario, ({ nodes, models, picks }) => {
        const requests: PlacementRequest[] = picks.map((p, i) => ({ model: models[p]!, replicaId: `r${i}` }));
        const kept = placeMany({ nodes, reservations: [], requests });
        // Nodes to avoid that no node is: the ranking is the same, but the decision
        // reads a figure the kept answers do not hold, so it scans every candidate.
        const fleet = prepareFleet(nodes);
        const scanned: PlacementOutcome[] = [];
        for (const r of requests) {
          const out = placeOnFleet(fleet, r.model, { avoidNodes: ['no-such-node'] });
          scanned.push(out);
          if (out.placement) reserve(fleet, reservationsFor(out.placement, r.replicaId, r.model.name));
        }
        expect(kept.outcomes).toEqual(scanned);
      }),
      { numRuns: 200 },
    );
  });
});
