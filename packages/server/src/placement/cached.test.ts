import { describe, expect, it } from '@jest/globals';
import { place } from './index.js';
import type { NodeSnapshot } from '../snapshot.js';
import { GB, makeModel, makeNode, makeProfile, makeReservation } from '../../test/factories.js';

/** The `cached` rule (select.ts, rule 5): among nodes the earlier rules leave equal, the one holding the file. */
const FILE = 'ab'.repeat(32);
const OTHER = 'cd'.repeat(32);
const urlModel = (extra = {}) =>
  makeModel({ name: 'm', source: 'https://files.example/m.gguf', sha256: FILE.toUpperCase(), profiles: [makeProfile({ min_memory_gb: 1 })], ...extra });
const node = (id: string, files: string[] = [], extra: Partial<NodeSnapshot> = {}) =>
  makeNode({ id, memoryTotalMb: 16 * GB, ...(files.length ? { files: new Set(files) } : {}), ...extra });

describe('placement prefers a node that already holds the file', () => {
  it.each([
    ['holds it: wins over a lower node id', urlModel(), [node('a'), node('b', [FILE])], {}, 'b'],
    ['holds another file only: no preference', urlModel(), [node('a'), node('b', [OTHER])], {}, 'a'],
    [
      'a source the engine reads itself: files do not count',
      makeModel({ name: 'm', source: 'org/m', profiles: [makeProfile({ min_memory_gb: 1 })] }),
      [node('a'), node('b', [FILE])],
      {},
      'a',
    ],
    [
      "a profile's own URL: its own digest counts",
      urlModel({ profiles: [makeProfile({ source: 'https://x.example/p.gguf', sha256: OTHER })] }),
      [node('a', [FILE]), node('b', [OTHER])],
      {},
      'b',
    ],
    [
      'spread comes first: a node with a replica of the model already loses, file or not',
      urlModel(),
      [node('a'), node('b', [FILE])],
      { existingOnNode: { b: 1 } },
      'a',
    ],
    ['a failure there comes first: an avoided node loses, file or not', urlModel(), [node('a'), node('b', [FILE])], { avoidNodes: ['b'] }, 'a'],
    ['best fit on memory comes first', urlModel(), [node('a', [], { memoryTotalMb: 8 * GB }), node('b', [FILE])], {}, 'a'],
    ['among equals holding it, node id', urlModel(), [node('c', [FILE]), node('b', [FILE]), node('a')], {}, 'b'],
  ])('%s', (_name, model, nodes, options, winner) => {
    const out = place({ model, nodes, reservations: [], ...options });
    expect(out.placement?.shards.map((s) => s.nodeId)).toEqual([winner]);
  });

  it('a third replica goes to the node that kept the file, once spread is even', () => {
    // Two replicas on a and b already; c and d are empty, only d holds the file.
    const reservations = [
      makeReservation({ model: 'm', nodeId: 'a', memoryMb: 0 }),
      makeReservation({ replicaId: 'r-2', model: 'm', nodeId: 'b', memoryMb: 0 }),
    ];
    const out = place({ model: urlModel(), nodes: [node('a', [FILE]), node('b', [FILE]), node('c'), node('d', [FILE])], reservations });
    expect(out.placement?.shards.map((s) => s.nodeId)).toEqual(['d']);
  });

  it('a sharded profile takes the nodes holding the file first', () => {
    const model = urlModel({ profiles: [makeProfile({ min_memory_gb: 1, shards: 2, fabric: 'ethernet' })] });
    const nodes = ['a', 'b', 'c', 'd'].map((id) => node(id, id === 'b' || id === 'd' ? [FILE] : [], { fabrics: ['ethernet'] }));
    const out = place({ model, nodes, reservations: [] });
    expect(out.placement?.shards.map((s) => s.nodeId)).toEqual(['b', 'd']);
  });
});
