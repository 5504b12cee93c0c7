import { afterEach, describe, expect, it } from '@jest/globals';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CatalogError, CatalogWatcher, loadCatalog, parseCatalog, type LoadedCatalog } from './catalog.js';

const fixtures = fileURLToPath(new URL('../../test/catalogs/', import.meta.url));
const fixture = (name: string): string => join(fixtures, name);

/** Joins lines, so a test can count them: line N is `lines[N - 1]`. */
const yaml = (...lines: string[]): string => lines.join('\n') + '\n';

function parseError(text: string): CatalogError {
  try {
    parseCatalog(text, 'c.yaml');
  } catch (err) {
    if (err instanceof CatalogError) return err;
    throw err;
  }
  throw new Error('expected the catalog to be rejected');
}

async function loadError(name: string): Promise<CatalogError> {
  const err = await loadCatalog(fixture(name)).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof CatalogError) return err;
  throw new Error(`expected ${name} to be rejected, got ${String(err)}`);
}

/** One model with one profile; `extra` lines go into the model, `profile` lines into its profile. */
const oneModel = (extra: string[] = [], profile: string[] = []): string =>
  yaml(
    'models:', //                        1
    '  - name: m', //                    2
    '    source: org/m', //              3
    ...extra.map((l) => `    ${l}`),
    '    profiles:',
    '      - name: p',
    '        engine: vllm',
    ...profile.map((l) => `        ${l}`),
  );

describe('parseCatalog: a valid catalog', () => {
  it('loads the example with defaults made explicit', async () => {
    const catalog = await loadCatalog(fixture('valid.yaml'));
    expect(catalog.file).toBe(fixture('valid.yaml'));
    expect(catalog.models.map((m) => m.name)).toEqual(['qwen-coder-14b', 'llama-70b', 'llama-8b']);

    const [qwen, llama70, llama8] = catalog.models;
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
    expect(catalog.models[0].profiles.map((p) => [p.name, p.gpus, p.args])).toEqual([
      ['one', 1, ['--enforce-eager']],
      ['two', 2, ['--enforce-eager']],
    ]);
  });
});

describe('parseCatalog: schema errors name the model, field and line', () => {
  it('a value of the wrong type', async () => {
    const err = await loadError('bad-type.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('bad-type.yaml')}: model "qwen-coder-14b" (line 8): profiles[0].min_memory_gb must be number`,
    );
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

  it('an unknown engine, listing the valid ones', async () => {
    const err = await loadError('bad-engine.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('bad-engine.yaml')}: model "qwen-coder-14b" (line 7): ` +
        'profiles[0].engine must be one of vllm, sglang, llama.cpp, node-llama-cpp, command',
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
      'catalog c.yaml: model "m" (line 9): profiles[0].node_selector.nvidia.com/gpu.count must be string',
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
    expect(parseError('- name: m\n').message).toBe(
      'catalog c.yaml (line 1): the top level must be a mapping with a models: list',
    );
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

  it('rejects a key given twice', () => {
    const err = parseError(oneModel([], ['gpus: 1', 'gpus: 2']));
    expect(err.message).toBe('catalog c.yaml (line 8): YAML syntax error: Map keys must be unique');
  });
});

describe('parseCatalog: cross-checks', () => {
  it('duplicate model names', async () => {
    const err = await loadError('duplicate-model.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('duplicate-model.yaml')}: model "llama-8b" (line 10): name "llama-8b" is already used by models[0] (line 3)`,
    );
    expect(err).toMatchObject({ model: 'llama-8b', field: 'models[1].name', modelField: 'name', line: 10 });
  });

  it('a fallback cycle, reported as a path', async () => {
    const err = await loadError('fallback-cycle.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('fallback-cycle.yaml')}: model "chat" (line 5): fallbacks[0] "coder" makes a cycle: chat → coder → chat`,
    );
    expect(err.field).toBe('models[0].fallbacks[0]');
  });

  it('a longer fallback cycle starts at the first model in the file that is on it', () => {
    const model = (name: string, fallbacks: string) => [
      `  - name: ${name}`,
      '    source: org/x',
      `    fallbacks: [${fallbacks}]`,
      '    profiles: [{name: p, engine: vllm}]',
    ];
    const err = parseError(yaml('models:', ...model('a', 'b'), ...model('b', 'c'), ...model('c', 'd'), ...model('d', 'b')));
    expect(err.message).toBe('catalog c.yaml: model "b" (line 8): fallbacks[0] "c" makes a cycle: b → c → d → b');
  });

  it('a model falling back to itself', () => {
    expect(parseError(oneModel(['fallbacks: [m]'])).message).toBe(
      'catalog c.yaml: model "m" (line 4): fallbacks[0] "m" is the model itself',
    );
  });

  it('a fallback to an unknown model suggests close names', () => {
    const err = parseError(
      yaml(
        'models:',
        '  - name: llama-8b',
        '    source: org/l',
        '    profiles: [{name: p, engine: vllm}]',
        '  - name: qwen',
        '    source: org/q',
        '    fallbacks:',
        '      - lama-8b',
        '    profiles: [{name: p, engine: vllm}]',
      ),
    );
    expect(err.message).toBe(
      'catalog c.yaml: model "qwen" (line 8): fallbacks[0] "lama-8b" is not a model in this catalog (did you mean "llama-8b"?)',
    );
    expect(err.field).toBe('models[1].fallbacks[0]');
  });

  it('a fallback naming an alias, close to an alias, or named twice', () => {
    const text = (fallbacks: string) =>
      yaml(
        'models:',
        '  - name: llama-8b',
        '    aliases: [llama]',
        '    source: org/l',
        '    profiles: [{name: p, engine: vllm}]',
        '  - name: qwen',
        '    source: org/q',
        `    fallbacks: [${fallbacks}]`,
        '    profiles: [{name: p, engine: vllm}]',
      );
    expect(parseError(text('llama')).message).toBe(
      'catalog c.yaml: model "qwen" (line 8): fallbacks[0] "llama" is an alias; name the model "llama-8b"',
    );
    expect(parseError(text('lama')).message).toBe(
      'catalog c.yaml: model "qwen" (line 8): fallbacks[0] "lama" is not a model in this catalog (did you mean "llama-8b"?)',
    );
    expect(parseError(text('llama-8b, llama-8b')).message).toBe(
      'catalog c.yaml: model "qwen" (line 8): fallbacks[1] "llama-8b" is listed twice',
    );
  });

  describe('aliases', () => {
    const two = (aAliases: string, bAliases: string) =>
      yaml(
        'models:', //                            1
        '  - name: a', //                        2
        `    aliases: [${aAliases}]`, //         3
        '    source: org/a', //                  4
        '    profiles: [{name: p, engine: vllm}]', // 5
        '  - name: b', //                        6
        '    aliases:', //                       7
        ...bAliases.split(',').map((x) => `      - ${x.trim()}`), // 8…
        '    source: org/b',
        '    profiles: [{name: p, engine: vllm}]',
      );

    it('colliding with another model name', () => {
      const err = parseError(two('x', 'y, a'));
      expect(err.message).toBe('catalog c.yaml: model "b" (line 9): aliases[1] "a" is already the name of models[0] (line 2)');
      expect(err.field).toBe('models[1].aliases[1]');
    });

    it('colliding with the model it belongs to', () => {
      expect(parseError(two('x', 'b')).message).toBe(
        'catalog c.yaml: model "b" (line 8): aliases[0] "b" is the model\'s own name',
      );
    });

    it('colliding with an alias of another model', () => {
      expect(parseError(two('x, chat', 'chat')).message).toBe(
        'catalog c.yaml: model "b" (line 8): aliases[0] "chat" is already an alias of model "a" (line 3)',
      );
    });

    it('listed twice in one model', () => {
      expect(parseError(two('x', 'y, y')).message).toBe('catalog c.yaml: model "b" (line 9): aliases[1] "y" is listed twice');
    });
  });

  it('duplicate profile names within a model', () => {
    const err = parseError(
      yaml(
        'models:', //                   1
        '  - name: m', //               2
        '    source: org/m', //         3
        '    profiles:', //             4
        '      - name: fast', //        5
        '        engine: vllm', //      6
        '      - name: fast', //        7
        '        engine: sglang', //    8
      ),
    );
    expect(err.message).toBe('catalog c.yaml: model "m" (line 7): profiles[1].name "fast" is already used by profiles[0] (line 5)');
    expect(err.field).toBe('models[0].profiles[1].name');
  });

  it('the same profile name in two models is fine', () => {
    const catalog = parseCatalog(
      yaml(
        'models:',
        '  - {name: a, source: org/a, profiles: [{name: cpu, engine: llama.cpp}]}',
        '  - {name: b, source: org/b, profiles: [{name: cpu, engine: llama.cpp}]}',
      ),
      'c.yaml',
    );
    expect(catalog.models.map((m) => m.profiles[0].name)).toEqual(['cpu', 'cpu']);
  });

  it('scaling.min greater than scaling.max', () => {
    expect(parseError(oneModel(['scaling:', '  min: 3', '  max: 1'])).message).toBe(
      'catalog c.yaml: model "m" (line 5): scaling.min (3) is greater than scaling.max (1)',
    );
  });

  it('engine command without a command', () => {
    const err = parseError(oneModel().replace('engine: vllm', 'engine: command'));
    expect(err.message).toBe('catalog c.yaml: model "m" (line 5): profiles[0].command is required with engine command');
    expect(err.field).toBe('models[0].profiles[0].command');
  });

  it('a command with another engine', () => {
    expect(parseError(oneModel([], ['command: [./serve, --port, "{port}"]'])).message).toBe(
      'catalog c.yaml: model "m" (line 7): profiles[0].command is only used with engine command, not vllm',
    );
  });

  it('accepts engine command with a command', () => {
    const catalog = parseCatalog(
      oneModel().replace('engine: vllm', 'engine: command\n        command: [./serve, --port, "{port}"]'),
      'c.yaml',
    );
    expect(catalog.models[0].profiles[0].command).toEqual(['./serve', '--port', '{port}']);
  });

  it('shards > 1 without a fabric', async () => {
    const err = await loadError('shards-without-fabric.yaml');
    expect(err.message).toBe(
      `catalog ${fixture('shards-without-fabric.yaml')}: model "llama-405b" (line 6): profiles[0].fabric is required when shards > 1 (shards: 2)`,
    );
    expect(err.field).toBe('models[0].profiles[0].fabric');
  });

  it('GPU requirements on a profile without gpus', () => {
    expect(parseError(oneModel([], ['gpu_class: [H100]'])).message).toBe(
      'catalog c.yaml: model "m" (line 7): profiles[0].gpu_class needs gpus > 0 (with gpus 0 the profile runs on CPU)',
    );
    expect(parseError(oneModel([], ['min_gpu_memory_gb: 40'])).message).toBe(
      'catalog c.yaml: model "m" (line 7): profiles[0].min_gpu_memory_gb needs gpus > 0 (with gpus 0 the profile runs on CPU)',
    );
  });
});

describe('loadCatalog', () => {
  it('reports a file that cannot be read', async () => {
    const err = await loadError('no-such-file.yaml');
    expect(err.message).toMatch(
      new RegExp(`^catalog ${fixture('no-such-file.yaml')}: cannot be read: ENOENT: no such file or directory`),
    );
    expect(err.line).toBeUndefined();
  });
});

describe('LoadedCatalog', () => {
  it('resolves names and aliases', async () => {
    const catalog = await loadCatalog(fixture('valid.yaml'));
    expect(catalog.resolve('qwen-coder-14b')?.name).toBe('qwen-coder-14b');
    expect(catalog.resolve('coder')?.name).toBe('qwen-coder-14b');
    expect(catalog.resolve('llama')?.name).toBe('llama-8b');
    expect(catalog.resolve('Llama')).toBeUndefined();
    expect(catalog.resolve('gpt-4')).toBeUndefined();
  });

  it('suggests close names and aliases, one per model, closest first', async () => {
    const catalog = await loadCatalog(fixture('valid.yaml'));
    expect(catalog.suggest('lama-8b')).toEqual(['llama-8b']);
    expect(catalog.suggest('Llama-70B')).toEqual(['llama-70b', 'llama-8b']);
    expect(catalog.suggest('qwen')).toEqual(['qwen-coder']);
    expect(catalog.suggest('codr')).toEqual(['coder']);
    expect(catalog.suggest('gpt-4o-mini')).toEqual([]);
  });

  it('suggests at most three', () => {
    const names = ['m-1', 'm-2', 'm-3', 'm-4'];
    const catalog = parseCatalog(
      yaml('models:', ...names.map((n) => `  - {name: ${n}, source: org/x, profiles: [{name: p, engine: vllm}]}`)),
      'c.yaml',
    );
    expect(catalog.suggest('m-0')).toEqual(['m-1', 'm-2', 'm-3']);
  });
});

describe('CatalogWatcher', () => {
  const catalogText = (...names: string[]) =>
    yaml('models:', ...names.map((n) => `  - {name: ${n}, source: org/${n}, profiles: [{name: cpu, engine: llama.cpp}]}`));

  let dir: string | undefined;
  let watcher: CatalogWatcher | undefined;
  afterEach(async () => {
    watcher?.close();
    watcher = undefined;
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  async function setUp(options: { pollMs?: number; fsWatch?: boolean } = {}) {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-catalog-'));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, catalogText('a'));
    const changes: LoadedCatalog[] = [];
    const errors: CatalogError[] = [];
    watcher = await CatalogWatcher.start(file, {
      onChange: (c) => changes.push(c),
      onError: (e) => errors.push(e),
      ...options,
    });
    return { file, changes, errors, watcher };
  }

  async function waitFor(what: string, condition: () => boolean, timeoutMs = 1000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  const names = (c: LoadedCatalog | undefined) => c?.models.map((m) => m.name);

  it('reloads on change, keeps the running catalog through a broken edit, and recovers', async () => {
    const { file, changes, errors, watcher } = await setUp();
    expect(names(watcher.current)).toEqual(['a']);

    await writeFile(file, catalogText('a', 'b'));
    await waitFor('the first change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['a', 'b']);
    expect(watcher.current).toBe(changes[0]);

    await writeFile(file, catalogText('a', 'b') + '  - {name: c, source: org/c, profiles: []}\n');
    await waitFor('the error', () => errors.length === 1);
    expect(errors[0].message).toBe(`catalog ${file}: model "c" (line 4): profiles must NOT have fewer than 1 items`);
    expect(names(watcher.current)).toEqual(['a', 'b']);
    expect(changes).toHaveLength(1);

    await writeFile(file, catalogText('a', 'b', 'c'));
    await waitFor('the fix', () => changes.length === 2);
    expect(names(changes[1])).toEqual(['a', 'b', 'c']);
    expect(names(watcher.current)).toEqual(['a', 'b', 'c']);
    expect(errors).toHaveLength(1);
  });

  it('sees a file replaced by rename, as editors and config management do', async () => {
    const { file, changes } = await setUp({ pollMs: 0 });
    const temp = `${file}.tmp`;
    await writeFile(temp, catalogText('renamed'));
    await rename(temp, file);
    await waitFor('the change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['renamed']);
  });

  it('falls back on polling when fs.watch is not available', async () => {
    const { file, changes } = await setUp({ fsWatch: false, pollMs: 50 });
    await writeFile(file, catalogText('a', 'polled'));
    await waitFor('the change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['a', 'polled']);
  });

  it('reload() reports whether anything changed and ignores edits that change no model', async () => {
    const { file, changes, errors, watcher } = await setUp({ fsWatch: false, pollMs: 0 });
    await expect(watcher.reload()).resolves.toBe(false);

    await writeFile(file, '# a comment\n' + catalogText('a'));
    await expect(watcher.reload()).resolves.toBe(false);

    await writeFile(file, catalogText('a', 'b'));
    await expect(watcher.reload()).resolves.toBe(true);
    expect(names(changes[0])).toEqual(['a', 'b']);

    // Every explicit reload of a broken file answers, unlike repeated file events.
    await writeFile(file, 'models: [\n');
    await expect(watcher.reload()).resolves.toBe(false);
    await expect(watcher.reload()).resolves.toBe(false);
    expect(errors.map((e) => e.line)).toEqual([2, 2]);
    expect(errors[0].message).toMatch(new RegExp(`^catalog ${file} \\(line 2\\): YAML syntax error: `));
    expect(names(watcher.current)).toEqual(['a', 'b']);
    expect(changes).toHaveLength(1);
  });

  it('reports a deleted file once and keeps the catalog', async () => {
    const { file, errors, watcher } = await setUp({ pollMs: 50 });
    await rm(file);
    await waitFor('the error', () => errors.length === 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(errors).toHaveLength(1);
    expect(errors[0].message).toMatch(new RegExp(`^catalog ${file}: cannot be read: ENOENT`));
    expect(names(watcher.current)).toEqual(['a']);
  });

  it('refuses to start on a broken catalog', async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-catalog-'));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, 'models:\n  - name: a\n');
    const started = CatalogWatcher.start(file, { onChange: () => undefined, onError: () => undefined });
    await expect(started).rejects.toThrow(`catalog ${file}: model "a" (line 2): source is required`);
  });

  it('stops after close()', async () => {
    const { file, changes, watcher } = await setUp({ pollMs: 50 });
    watcher.close();
    await writeFile(file, catalogText('a', 'late'));
    await new Promise((r) => setTimeout(r, 300));
    expect(changes).toHaveLength(0);
    await expect(watcher.reload()).resolves.toBe(false);
    expect(names(watcher.current)).toEqual(['a']);
  });
});
