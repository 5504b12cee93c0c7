import { describe, expect, it } from '@jest/globals';
import { estimatesFrom, modelsAwaitingEstimates, pendingSources, placementModels, sourcesToEstimate, withEstimates } from './estimates.js';
import { place } from './placement/index.js';
import { makeModel, makeNode, makeProfile, makeReport } from '../test/factories.js';

const gguf = makeModel({ name: 'tiny', source: '/models/tiny.gguf', profiles: [makeProfile({ engine: 'node-llama-cpp' })] });

describe('GGUF memory estimates', () => {
  it('asks only about GGUF profiles that state no min_memory_gb', () => {
    const stated = makeModel({ name: 'x', source: '/m/x.gguf', profiles: [makeProfile({ engine: 'llama.cpp', min_memory_gb: 4 })] });
    const vllm = makeModel({ name: 'y', source: 'org/y', profiles: [makeProfile({ engine: 'vllm' })] });
    expect(sourcesToEstimate([gguf, stated, vllm])).toEqual(['/models/tiny.gguf']);
  });

  it('takes the largest estimate any node reported', () => {
    const report = (mb: number) =>
      makeReport({ source_estimates: [{ source: '/models/tiny.gguf', memory_mb: mb, weights_mb: 1, kv_cache_mb: 1, context_length: 1024 }] });
    expect(estimatesFrom([report(300), undefined, report(9216)])).toEqual(new Map([['/models/tiny.gguf', 9216]]));
  });

  it('places with the estimate and says it is one', () => {
    const [model] = withEstimates([gguf], new Map([['/models/tiny.gguf', 9216]]));
    if (!model) throw new Error('withEstimates dropped the model');
    expect(model.profiles[0]).toMatchObject({ min_memory_gb: 9, memory_estimated: true });
    const out = place({ model, nodes: [makeNode({ id: 'small', memoryTotalMb: 8 * 1024 })], reservations: [] });
    expect(out.placement).toBeUndefined();
    expect(out.rejections.map((r) => r.reason)).toEqual(['has 8 GiB of memory, needs about 9 GiB (estimated from the GGUF)']);
  });

  it('waits only for agents that can estimate and have not looked yet', () => {
    const base = makeReport();
    const src = ['/models/tiny.gguf'];
    expect(pendingSources(src, [{ ...base, estimated_sources: [] }])).toEqual(new Set(src));
    expect(pendingSources(src, [{ ...base, estimated_sources: src }])).toEqual(new Set());
    expect(pendingSources(src, [base])).toEqual(new Set());
    expect(modelsAwaitingEstimates([gguf], new Set(src))).toEqual(new Set(['tiny']));
  });

  it('leaves a model without an estimate as written', () => {
    const models = [gguf];
    expect(withEstimates(models, new Map())).toBe(models);
    expect(withEstimates(models, new Map([['/other.gguf', 1]]))[0]).toBe(gguf);
  });
});

describe('placementModels with fetched sources', () => {
  const url = 'https://files.example/m.gguf';
  const model = makeModel({ name: 'm', source: url, sha256: 'ab'.repeat(32), profiles: [makeProfile({ engine: 'node-llama-cpp' })] });
  it('asks agents for none of them, waits while the server reads, then places with the estimate', () => {
    expect(sourcesToEstimate([model])).toEqual([]);
    const live = [makeReport({ estimated_sources: [] })];
    const reading = placementModels([model], live, live, { lookup: () => ({ estimates: new Map(), pending: new Set([url]) }) });
    expect([...reading.defer]).toEqual(['m']);
    const read = placementModels([model], live, live, { lookup: (w) => ({ estimates: new Map(w.map((x) => [x.source, 2048])), pending: new Set() }) });
    expect([[...read.defer], read.models[0]?.profiles[0]]).toEqual([[], expect.objectContaining({ min_memory_gb: 2, memory_estimated: true })]);
  });
});
