import { describe, expect, it } from '@jest/globals';
import type { Replica } from '../domain.js';
import { makeReplica } from '../../test/factories.js';
import { assignmentsFor } from './assignments.js';
import { specOf } from '../reconcile/spec.js';
import { makeModel } from '../../test/factories.js';

const spec = { engine: 'vllm', source: 'org/model', args: ['--x'], env: { A: '1' }, startupTimeoutS: 60 };
const twoNodes = (extra: Partial<Replica> = {}) =>
  makeReplica({
    spec,
    masterPort: 29501,
    shards: [
      { id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: ['g0'], gpuIndices: [0], state: 'ready' },
      { id: 'r-1-1', nodeId: 'node-2', rank: 1, gpuUuids: ['g1'], gpuIndices: [1], state: 'ready' },
    ],
    ...extra,
  });
const addr = (id: string) => ({ 'node-1': '10.0.0.1', 'node-2': '10.0.0.2' })[id];

describe('assignmentsFor', () => {
  it('builds a node’s shards from the spec frozen on the replica, pointing followers at rank 0', () => {
    expect(assignmentsFor('node-2', [twoNodes()], addr)).toEqual([
      {
        id: 'r-1-1',
        replica_id: 'r-1',
        model: 'qwen-coder-14b',
        profile: 'cpu',
        engine: 'vllm',
        source: 'org/model',
        rank: 1,
        shards: 2,
        gpus: ['g1'],
        gpu_indices: [1],
        args: ['--x'],
        env: { A: '1' },
        master_addr: '10.0.0.1',
        master_port: 29501,
        api_key: 'k',
        startup_timeout_s: 60,
      },
    ]);
  });

  it('keeps a draining replica running, drops failed and stopped ones, and those with no spec', () => {
    expect(assignmentsFor('node-1', [twoNodes({ state: 'draining' })], addr)).toHaveLength(1);
    expect(assignmentsFor('node-1', [twoNodes({ state: 'failed' }), twoNodes({ state: 'stopped' })], addr)).toEqual([]);
    const { spec: _none, ...legacy } = twoNodes();
    expect(assignmentsFor('node-1', [legacy], addr)).toEqual([]);
  });

  it('gives a single-node replica no rendezvous', () => {
    const single = makeReplica({ spec, masterPort: 29501 });
    expect(assignmentsFor('node-1', [single], addr)[0]).not.toHaveProperty('master_port');
    expect(assignmentsFor('node-1', [single], addr)[0]).not.toHaveProperty('master_addr');
  });

  it('asks the agent to fetch and verify a URL source, with the digest frozen on the spec', () => {
    const digest = 'AB'.repeat(32);
    const model = makeModel({ source: 'https://files.example/m.gguf', sha256: digest });
    const profile = model.profiles[0]!;
    const r = makeReplica({ spec: specOf(model, profile) });
    expect(assignmentsFor('node-1', [r], addr)[0]).toMatchObject({
      source: 'https://files.example/m.gguf',
      file: { url: 'https://files.example/m.gguf', sha256: 'ab'.repeat(32) },
    });
    // A profile's own source takes its own digest; a hub id asks for no file.
    const own = specOf(model, { ...profile, source: 'llmgw://other.gguf', sha256: 'cd'.repeat(32) });
    expect(own.file).toEqual({ url: 'llmgw://other.gguf', sha256: 'cd'.repeat(32) });
    expect(specOf(makeModel({ source: 'org/model' }), profile).file).toBeUndefined();
  });
});
