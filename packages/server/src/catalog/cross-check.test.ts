import { describe, expect, it } from '@jest/globals';
import { parseCatalog } from './catalog.js';
import { fixture, yaml, parseError, loadError, oneModel } from './testing.js';

describe('parseCatalog: cross-checks', () => {
  it('duplicate model names', async () => {
    const err = await loadError('duplicate-model.yaml');
    expect(err.message).toBe(`catalog ${fixture('duplicate-model.yaml')}: model "llama-8b" (line 10): name "llama-8b" is already used by models[0] (line 3)`);
    expect(err).toMatchObject({ model: 'llama-8b', field: 'models[1].name', modelField: 'name', line: 10 });
  });

  it('a fallback cycle, reported as a path', async () => {
    const err = await loadError('fallback-cycle.yaml');
    expect(err.message).toBe(`catalog ${fixture('fallback-cycle.yaml')}: model "chat" (line 5): fallbacks[0] "coder" makes a cycle: chat → coder → chat`);
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
    expect(parseError(oneModel(['fallbacks: [m]'])).message).toBe('catalog c.yaml: model "m" (line 4): fallbacks[0] "m" is the model itself');
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
    expect(err.message).toBe('catalog c.yaml: model "qwen" (line 8): fallbacks[0] "lama-8b" is not a model in this catalog (did you mean "llama-8b"?)');
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
    expect(parseError(text('llama')).message).toBe('catalog c.yaml: model "qwen" (line 8): fallbacks[0] "llama" is an alias; name the model "llama-8b"');
    expect(parseError(text('lama')).message).toBe(
      'catalog c.yaml: model "qwen" (line 8): fallbacks[0] "lama" is not a model in this catalog (did you mean "llama-8b"?)',
    );
    expect(parseError(text('llama-8b, llama-8b')).message).toBe('catalog c.yaml: model "qwen" (line 8): fallbacks[1] "llama-8b" is listed twice');
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
      expect(parseError(two('x', 'b')).message).toBe('catalog c.yaml: model "b" (line 8): aliases[0] "b" is the model\'s own name');
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
    expect(catalog.models.map((m) => m.profiles[0]!.name)).toEqual(['cpu', 'cpu']);
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
    const catalog = parseCatalog(oneModel().replace('engine: vllm', 'engine: command\n        command: [./serve, --port, "{port}"]'), 'c.yaml');
    expect(catalog.models[0]!.profiles[0]!.command).toEqual(['./serve', '--port', '{port}']);
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
