import { describe, expect, it } from '@jest/globals';
import { describeDiff, diffCatalogs } from './diff.js';
import { parseCatalog } from './parse.js';
import { yaml } from './testing.js';

const catalog = (...models: [string, string][]) =>
  parseCatalog(yaml('models:', ...models.map(([n, engine]) => `  - {name: ${n}, source: org/${n}, profiles: [{name: p, engine: ${engine}}]}`)), 'c.yaml');

describe('diffCatalogs', () => {
  it('names the models added, removed and changed', () => {
    const d = diffCatalogs(catalog(['a', 'vllm'], ['b', 'vllm'], ['c', 'vllm']), catalog(['a', 'vllm'], ['b', 'sglang'], ['d', 'vllm'], ['e', 'vllm']));
    expect(d).toEqual({ added: ['d', 'e'], removed: ['c'], changed: ['b'] });
    expect(describeDiff(d)).toBe('+2 models, -1 model, 1 changed');
  });

  it('reads as the issue asks for one model added and one changed', () => {
    expect(describeDiff(diffCatalogs(catalog(['a', 'vllm']), catalog(['a', 'sglang'], ['b', 'vllm'])))).toBe('+1 model, 1 changed');
  });

  it('a reorder changes no model', () => {
    expect(describeDiff(diffCatalogs(catalog(['a', 'vllm'], ['b', 'vllm']), catalog(['b', 'vllm'], ['a', 'vllm'])))).toBe('no model changed');
  });
});
