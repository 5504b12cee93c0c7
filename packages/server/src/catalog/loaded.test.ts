import { describe, expect, it } from '@jest/globals';
import { loadCatalog, parseCatalog } from './catalog.js';
import { fixture, yaml } from './testing.js';

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
    const catalog = parseCatalog(yaml('models:', ...names.map((n) => `  - {name: ${n}, source: org/x, profiles: [{name: p, engine: vllm}]}`)), 'c.yaml');
    expect(catalog.suggest('m-0')).toEqual(['m-1', 'm-2', 'm-3']);
  });
});
