import { describe, expect, it } from '@jest/globals';
import { MAX_CATALOG_PROBLEMS } from './errors.js';
import { parseError, yaml } from './testing.js';

describe('parseCatalog: every problem at once', () => {
  it('lists each schema problem in file order, with model, field, line and a "did you mean"', () => {
    const err = parseError(
      yaml(
        'models:', //                              1
        '  - name: a', //                          2
        '    source: org/a', //                    3
        '    profiles:', //                        4
        '      - name: cpu', //                    5
        '        engine: node-lama-cpp', //        6
        '        min_memory_gb: 8GB', //           7
        '  - name: b', //                          8
        '    source: org/b', //                    9
        '    falbacks: [a]', //                    10
        '    profiles:', //                        11
        '      - name: gpu', //                    12
        '        engine: VLLM', //                 13
        '        gpus: 1', //                      14
      ),
    );
    expect(err.lines()).toEqual([
      'catalog c.yaml: model "a" (line 6): profiles[0].engine must be one of vllm, sglang, llama.cpp, node-llama-cpp, command (did you mean node-llama-cpp?)',
      'catalog c.yaml: model "a" (line 7): profiles[0].min_memory_gb must be number',
      'catalog c.yaml: model "b" (line 10): falbacks is not a known field (did you mean fallbacks?)',
      'catalog c.yaml: model "b" (line 13): profiles[0].engine must be one of vllm, sglang, llama.cpp, node-llama-cpp, command (did you mean vllm?)',
    ]);
    expect(err.problems.map((p) => [p.model, p.field, p.line])).toEqual([
      ['a', 'models[0].profiles[0].engine', 6],
      ['a', 'models[0].profiles[0].min_memory_gb', 7],
      ['b', 'models[1].falbacks', 10],
      ['b', 'models[1].profiles[0].engine', 13],
    ]);
    // The error itself is the first problem, and says there are more.
    expect(err).toMatchObject({ model: 'a', field: 'models[0].profiles[0].engine', line: 6, more: 0 });
    expect(err.message).toBe(`${err.lines()[0]} (and 3 more problems)`);
  });

  it('a key misspelt next to the required one it stands for is one problem', () => {
    const err = parseError(yaml('models:', '  - name: m', '    sorce: org/m', '    profiles: [{name: p, engine: vllm}]'));
    expect(err.lines()).toEqual(['catalog c.yaml: model "m" (line 2): source is required (is "sorce" a typo?)']);
  });

  it('suggests nothing for a value far from every option', () => {
    const err = parseError(yaml('models:', '  - name: m', '    source: org/m', '    profiles: [{name: p, engine: tensorrt}]'));
    expect(err.message).toBe('catalog c.yaml: model "m" (line 4): profiles[0].engine must be one of vllm, sglang, llama.cpp, node-llama-cpp, command');
  });

  it('lists every cross-check problem, each mistake once', () => {
    const err = parseError(
      yaml(
        'models:', //                                            1
        '  - name: a', //                                        2
        '    source: org/a', //                                  3
        '    fallbacks: [qwen]', //                              4
        '    profiles: [{name: p, engine: vllm, shards: 2}]', // 5
        '  - name: a', //                                        6
        '    source: org/a2', //                                 7
        '    aliases: [a]', //                                   8
        '    profiles: [{name: p, engine: vllm}]', //            9
      ),
    );
    expect(err.lines()).toEqual([
      'catalog c.yaml: model "a" (line 4): fallbacks[0] "qwen" is not a model in this catalog',
      'catalog c.yaml: model "a" (line 5): profiles[0].fabric is required when shards > 1 (shards: 2)',
      'catalog c.yaml: model "a" (line 6): name "a" is already used by models[0] (line 2)',
      'catalog c.yaml: model "a" (line 8): aliases[0] "a" is already the name of models[0] (line 2)',
    ]);
  });

  it('refuses a profile env that loads code, or that its engine does not read, naming the field; engine: command may set any', () => {
    const err = parseError(
      yaml(
        'models:', //                                                                         1
        '  - name: a', //                                                                     2
        '    source: org/a', //                                                               3
        '    profiles:', //                                                                   4
        '      - { name: p, engine: node-llama-cpp, env: { NODE_OPTIONS: "--import=x" } }', // 5
        '      - { name: q, engine: vllm, env: { LD_PRELOAD: /tmp/x.so, VLLM_LOGGING_LEVEL: DEBUG, HF_HOME: /c } }', // 6
        '      - { name: r, engine: llama.cpp, env: { MY_SETTING: "1" } }', //                  7
        '      - { name: s, engine: command, command: [run], env: { NODE_OPTIONS: "--x" } }', // 8
        '  - name: b', //                                                                     9
        '    source: org/b', //                                                               10
        '    profiles: [{ name: p, engine: sglang, env: { PYTHONPATH: /tmp } }]', //            11
      ),
    );
    expect(err.lines()).toEqual([
      'catalog c.yaml: model "a" (line 5): profiles[0].env.NODE_OPTIONS loads code into the engine (as NODE_OPTIONS does), which only engine: command may do, on nodes started with --allow-command-engine',
      'catalog c.yaml: model "a" (line 6): profiles[1].env.LD_PRELOAD loads code into the engine (as LD_PRELOAD does), which only engine: command may do, on nodes started with --allow-command-engine',
      'catalog c.yaml: model "a" (line 7): profiles[2].env.MY_SETTING is not a variable llmgw passes to llama.cpp engines (allowed: LLAMA_*, GGML_*, CUDA_*, HF_*, OMP_*, and the like); use engine: command for anything else',
      'catalog c.yaml: model "b" (line 11): profiles[0].env.PYTHONPATH loads code into the engine (as PYTHONPATH does), which only engine: command may do, on nodes started with --allow-command-engine',
    ]);
  });

  it(`lists at most ${MAX_CATALOG_PROBLEMS} and counts the rest`, () => {
    const profiles = Array.from({ length: 25 }, (_, i) => `      - {name: p${i}, engine: vlm}`);
    const err = parseError(yaml('models:', '  - name: m', '    source: org/m', '    profiles:', ...profiles));
    expect(err.problems).toHaveLength(MAX_CATALOG_PROBLEMS);
    expect(err.more).toBe(5);
    expect(err.message).toMatch(/ \(and 24 more problems\)$/);
    expect(err.lines()).toHaveLength(MAX_CATALOG_PROBLEMS + 1);
    expect(err.lines().at(-1)).toBe('catalog c.yaml: 5 more problems not listed; fix these first');
  });

  it('lists every YAML syntax error', () => {
    const err = parseError(yaml('models:', '  - name: a', '    aliases: [x', '  - name: b: c', '    source: "x'));
    expect(err.problems.length).toBeGreaterThan(1);
    for (const p of err.problems) expect(p.message).toMatch(/^catalog c\.yaml \(line \d+\): YAML syntax error: /);
  });
});

describe('parseCatalog: a name given twice', () => {
  it('is suggested once', () => {
    const err = parseError(
      yaml(
        'models:',
        '  - {name: llama, source: org/a, profiles: [{name: p, engine: vllm}]}',
        '  - {name: llama, source: org/b, profiles: [{name: p, engine: vllm}]}',
        '  - {name: c, source: org/c, fallbacks: [lama], profiles: [{name: p, engine: vllm}]}',
      ),
    );
    expect(err.lines()[1]).toBe('catalog c.yaml: model "c" (line 4): fallbacks[0] "lama" is not a model in this catalog (did you mean "llama"?)');
  });
});

describe('parseCatalog: did you mean, in scaling', () => {
  it('knows every scaling key', () => {
    const err = parseError(
      yaml('models:', '  - name: m', '    source: org/m', '    scaling: {min: 1, max: 2, target_inflight: 4}', '    profiles: [{name: p, engine: vllm}]'),
    );
    expect(err.message).toBe('catalog c.yaml: model "m" (line 4): scaling.target_inflight is not a known field (did you mean target_in_flight?)');
  });
});
