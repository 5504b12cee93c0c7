import { describe, expect, it } from '@jest/globals';
import { loadCatalog, parseCatalog } from './catalog.js';
import { fixture, yaml, parseError, loadError, oneModel } from './testing.js';

describe('parseCatalog: a valid catalog', () => {
  it('loads the example with defaults made explicit', async () => {
    const catalog = await loadCatalog(fixture('valid.yaml'));
    expect(catalog.file).toBe(fixture('valid.yaml'));
    expect(catalog.models.map((m) => m.name)).toEqual(['qwen-coder-14b', 'llama-70b', 'llama-8b']);

    const [qwen, llama70, llama8] = catalog.models;
    if (!qwen || !llama70 || !llama8) throw new Error('expected three models');
    expect(qwen.scaling).toEqual({ min: 1, max: 3 });
    expect(qwen.aliases).toEqual(['qwen-coder', 'coder']);
    expect(qwen.fallbacks).toEqual(['llama-8b']);
    expect(qwen.profiles[0]).toEqual({
      name: 'h100x2',
      engine: 'vllm',
      gpus: 2,
      gpu_class: ['H100'],
      min_gpu_memory_gb: 40,
      shards: 1,
      args: ['--max-model-len', '32768'],
      env: {},
      node_selector: { role: 'coding' },
    });
    expect(qwen.profiles[1]).toEqual({
      name: 'cpu',
      engine: 'llama.cpp',
      source: '/models/qwen2.5-coder-14b-q4_k_m.gguf',
      min_memory_gb: 24,
      gpus: 0,
      shards: 1,
      args: [],
      env: {},
      node_selector: {},
    });
    expect(llama70.profiles[0]).toMatchObject({ shards: 2, fabric: 'infiniband', gpus: 8, env: { NCCL_IB_HCA: 'mlx5' } });
    expect(llama70.scaling).toEqual({ min: 0, max: 2 });
    expect(llama8.scaling).toEqual({ min: 1, max: 1 });
    expect(llama8.fallbacks).toEqual([]);
    expect(catalog.byName.get('llama-8b')).toBe(llama8);
    expect([...catalog.byName.keys()]).toEqual(['qwen-coder-14b', 'llama-70b', 'llama-8b']);
  });

  it('accepts an empty models list', () => {
    const catalog = parseCatalog('models: []\n', 'c.yaml');
    expect(catalog.models).toEqual([]);
    expect(catalog.byName.size).toBe(0);
    expect(catalog.resolve('anything')).toBeUndefined();
  });

  it('follows YAML anchors and << merges', () => {
    const catalog = parseCatalog(
      yaml(
        'models:',
        '  - name: m',
        '    source: org/m',
        '    profiles:',
        '      - &gpu',
        '        name: one',
        '        engine: vllm',
        '        gpus: 1',
        '        args: [--enforce-eager]',
        '      - <<: *gpu',
        '        name: two',
        '        gpus: 2',
      ),
      'c.yaml',
    );
    expect(catalog.models[0]!.profiles.map((p) => [p.name, p.gpus, p.args])).toEqual([
      ['one', 1, ['--enforce-eager']],
      ['two', 2, ['--enforce-eager']],
    ]);
  });
});

describe('parseCatalog: schema errors name the model, field and line', () => {
  it('a value of the wrong type', async () => {
    const err = await loadError('bad-type.yaml');
    expect(err.message).toBe(`catalog ${fixture('bad-type.yaml')}: model "qwen-coder-14b" (line 8): profiles[0].min_memory_gb must be number`);
    expect(err).toMatchObject({
      file: fixture('bad-type.yaml'),
      model: 'qwen-coder-14b',
      field: 'models[0].profiles[0].min_memory_gb',
      modelField: 'profiles[0].min_memory_gb',
      line: 8,
      problem: 'must be number',
    });
  });

  it('an unknown key, with the known key it resembles', async () => {
    const err = await loadError('unknown-key.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('unknown-key.yaml')}: model "qwen-coder-14b" (line 11): ` +
        'profiles[1].min_memroy_gb is not a known field (did you mean min_memory_gb?)',
    );
    expect(err.field).toBe('models[0].profiles[1].min_memroy_gb');
    expect(err.line).toBe(11);
  });

  it('an unknown engine, listing the valid ones and the likely one', async () => {
    const err = await loadError('bad-engine.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('bad-engine.yaml')}: model "qwen-coder-14b" (line 7): ` +
        'profiles[0].engine must be one of vllm, sglang, llama.cpp, node-llama-cpp, command (did you mean vllm?)',
    );
    expect(err.field).toBe('models[0].profiles[0].engine');
  });

  it('a missing field is placed on its parent, with a nearby typo pointed out', () => {
    const err = parseError(
      yaml(
        'models:', //                  1
        '  - name: m', //              2
        '    source: org/m', //        3
        '    profiles:', //            4
        '      - name: p', //          5
        '        engin: vllm', //      6
      ),
    );
    expect(err.message).toBe('catalog c.yaml: model "m" (line 5): profiles[0].engine is required (is "engin" a typo?)');
    expect(err.field).toBe('models[0].profiles[0].engine');
  });

  it('a missing key of a nested mapping is placed on the mapping key', () => {
    const err = parseError(oneModel(['scaling:', '  min: 1']));
    expect(err.message).toBe('catalog c.yaml: model "m" (line 4): scaling.max is required');
  });

  it('a model without a name is named by position', () => {
    const err = parseError(
      yaml(
        'models:', //                             1
        '  - name: a', //                         2
        '    source: org/a', //                   3
        '    profiles: [{name: p, engine: vllm}]', // 4
        '  - source: org/b', //                   5
        '    profiles: [{name: p, engine: vllm}]', // 6
      ),
    );
    expect(err.message).toBe('catalog c.yaml: models[1] (line 5): name is required');
    expect(err.model).toBe('models[1]');
    expect(err.field).toBe('models[1].name');
    expect(err.modelField).toBe('name');
  });

  it('a node_selector key containing dots still finds its line', () => {
    const err = parseError(oneModel([], ['node_selector:', '  kubernetes.io/arch: amd64', '  nvidia.com/gpu.count: 8']));
    expect(err.message).toBe(
      'catalog c.yaml: model "m" (line 9): profiles[0].node_selector.nvidia.com/gpu.count must be string (YAML reads an unquoted number as a number: put the value in quotes, e.g. "…")',
    );
  });

  it('a digest of digits only, unquoted, is told to be quoted', () => {
    const err = parseError(oneModel(['sha256: ' + '1'.repeat(64)]));
    expect(err.message).toMatch(/sha256 must be string \(YAML reads an unquoted number as a number: put the value in quotes, e\.g\. "…"\)$/);
    expect(parseError(oneModel([], ['fabric: true'])).message).toMatch(
      /fabric must be string \(YAML reads an unquoted true or false as a boolean: put the value in quotes/,
    );
  });

  it('an error inside a merged anchor points at the anchor', () => {
    const err = parseError(
      yaml(
        'models:', //                  1
        '  - name: m', //              2
        '    source: org/m', //        3
        '    profiles:', //            4
        '      - &base', //            5
        '        name: one', //        6
        '        engine: vllm', //     7
        '        gpus: 1', //          8
        '      - <<: *base', //        9
        '        gpus: 2', //          10
      ),
    );
    expect(err.message).toBe('catalog c.yaml: model "m" (line 6): profiles[1].name "one" is already used by profiles[0] (line 6)');
  });

  it('a file that is empty or only comments', () => {
    for (const text of ['', '# nothing yet\n']) {
      const err = parseError(text);
      expect(err.message).toBe('catalog c.yaml (line 1): models is required (the file is empty)');
      expect(err.field).toBe('models');
      expect(err.model).toBeUndefined();
    }
  });

  it('a file without models', () => {
    expect(parseError('modelz: []\n').message).toBe('catalog c.yaml (line 1): models is required (is "modelz" a typo?)');
    expect(parseError('# x\nmodels: {}\n').message).toBe('catalog c.yaml (line 2): models must be array');
  });

  it('a top level that is not a mapping', () => {
    expect(parseError('- name: m\n').message).toBe('catalog c.yaml (line 1): the top level must be a mapping with a models: list');
  });
});

describe('parseCatalog: YAML syntax errors', () => {
  it('names the line the parser stopped at', async () => {
    const err = await loadError('syntax-error.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('syntax-error.yaml')} (line 6): YAML syntax error: ` +
        'Flow sequence in block collection must be sufficiently indented and end with a ]',
    );
    expect(err.line).toBe(6);
    expect(err.model).toBeUndefined();
  });

  it('puts an error found at the end of the file on its last line, not one past it (issue 30)', () => {
    const text = 'models:\n  - name: tiny\n    source: "test\n    profiles: []\n\n';
    const err = parseError(text);
    expect(err.message).toMatch(/^catalog c\.yaml \(line 4\): YAML syntax error: Missing closing "quote/);
    expect(err.line).toBe(4);
  });

  it('rejects a key given twice', () => {
    const err = parseError(oneModel([], ['gpus: 1', 'gpus: 2']));
    expect(err.message).toBe('catalog c.yaml (line 8): YAML syntax error: Map keys must be unique');
  });
});

describe('loadCatalog', () => {
  it('reports a file that cannot be read', async () => {
    const err = await loadError('no-such-file.yaml');
    expect(err.message).toMatch(new RegExp(`^catalog ${fixture('no-such-file.yaml')}: cannot be read: ENOENT: no such file or directory`));
    expect(err.line).toBeUndefined();
  });
});

describe('parseCatalog: routing', () => {
  it('takes routing: cache-aware or least-loaded per model, absent meaning the default', () => {
    expect(parseCatalog(oneModel(['routing: least-loaded']), 'c.yaml').models[0]?.routing).toBe('least-loaded');
    expect(parseCatalog(oneModel(['routing: cache-aware']), 'c.yaml').models[0]?.routing).toBe('cache-aware');
    expect(parseCatalog(oneModel(), 'c.yaml').models[0]?.routing).toBeUndefined();
  });

  it('rejects another policy, naming the two and the likely one', () => {
    expect(parseError(oneModel(['routing: cache_aware'])).message).toMatch(/routing must be one of cache-aware, least-loaded \(did you mean cache-aware\?\)/);
  });
});
