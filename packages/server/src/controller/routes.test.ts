import { describe, expect, it } from '@jest/globals';
import { makeReplica } from '../../test/factories.js';
import { routeTable } from './routes.js';

describe('routeTable', () => {
  it('routes to ready replicas with an endpoint that serve, per model', () => {
    const replicas = [
      makeReplica({ id: 'a', endpoint: 'http://h:1' }),
      makeReplica({ id: 'b', endpoint: 'http://h:2', state: 'starting' }),
      makeReplica({ id: 'c' }),
      makeReplica({ id: 'd', endpoint: 'http://h:4', shards: [{ id: 'd-0', nodeId: 'silent', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }] }),
      makeReplica({ id: 'e', model: 'other', endpoint: 'http://h:5' }),
    ];
    const table = routeTable(replicas, (r) => r.shards.every((s) => s.nodeId !== 'silent'));
    expect(table.get('qwen-coder-14b')).toEqual([{ replicaId: 'a', endpoint: 'http://h:1', apiKey: 'k' }]);
    expect(table.get('other')?.map((t) => t.replicaId)).toEqual(['e']);
  });

  it("carries each replica's engine and its adapters in its spec's order, the order the agent gave its engine", () => {
    const spec = {
      engine: 'llama.cpp',
      source: '/m.gguf',
      args: [],
      env: {},
      adapters: [
        { name: 'sql', source: '/sql.gguf' },
        { name: 'chat', source: '/chat.gguf' },
      ],
      maxLoadedAdapters: 2,
    };
    const table = routeTable(
      [makeReplica({ id: 'a', endpoint: 'http://h:1', spec }), makeReplica({ id: 'b', endpoint: 'http://h:2', spec: { ...spec, adapters: undefined } })],
      () => true,
    );
    expect(table.get('qwen-coder-14b')).toEqual([
      { replicaId: 'a', endpoint: 'http://h:1', apiKey: 'k', engine: 'llama.cpp', adapters: ['sql', 'chat'] },
      { replicaId: 'b', endpoint: 'http://h:2', apiKey: 'k', engine: 'llama.cpp', adapters: [] },
    ]);
  });

  it('hands out targets the gateway cannot change', () => {
    const [target] = routeTable([makeReplica({ endpoint: 'http://h:1' })], () => true).get('qwen-coder-14b')!;
    expect(Object.isFrozen(target)).toBe(true);
  });
});
