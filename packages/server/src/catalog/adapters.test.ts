import { describe, expect, it } from '@jest/globals';
import { parseCatalog } from './parse.js';
import { oneModel, parseError, yaml } from './testing.js';

// Issue 31: `adapters:` on a model. Each is a model name for clients, fetched like a model file.

const SHA = 'a'.repeat(64);

describe('adapters in the catalog', () => {
  it('loads a model with adapters and finds each by name, with its base', () => {
    const c = parseCatalog(
      oneModel(
        ['adapters:', `  - { name: sql-lora, source: 'https://files.invalid/sql.gguf', sha256: ${SHA} }`, '  - { name: chat-lora, source: /models/chat.gguf }'],
        ['max_loaded_adapters: 4'],
      ),
      'c.yaml',
    );
    expect(c.adapter('sql-lora')).toMatchObject({ model: { name: 'm' }, adapter: { name: 'sql-lora', sha256: SHA } });
    expect(c.adapter('chat-lora')?.adapter.source).toBe('/models/chat.gguf');
    expect(c.adapter('m')).toBeUndefined();
    expect(c.resolve('sql-lora')).toBeUndefined();
    expect(c.models[0]!.profiles[0]!.max_loaded_adapters).toBe(4);
  });

  it('refuses a fetched adapter without its sha256, naming the adapter and the field', () => {
    const err = parseError(oneModel(['adapters:', "  - { name: sql-lora, source: 'https://files.invalid/sql.gguf' }"]));
    expect(err.field).toBe('models[0].adapters[0].sha256');
    expect(err.message).toMatch(/adapters\[0\]\.sha256 is required with an http\(s\):\/\/ or llmgw:\/\/ source/);
  });

  it('refuses an adapter named like its own model, another model, an alias or another adapter', () => {
    const two = (aLine: string, bLine: string) =>
      yaml(
        'models:', //                                   1
        '  - name: a', //                               2
        '    aliases: [chat]', //                       3
        '    source: org/a', //                         4
        '    profiles: [{name: p, engine: vllm}]', //   5
        `    adapters: [${aLine}]`, //                  6
        '  - name: b', //                               7
        '    source: org/b', //                         8
        '    profiles: [{name: p, engine: vllm}]', //   9
        `    adapters: [${bLine}]`, //                  10
      );
    const lora = (name: string) => `{name: ${name}, source: /m/${name}.gguf}`;
    expect(parseError(two(lora('x'), lora('b'))).message).toMatch(/adapters\[0\]\.name "b" is the model's own name/);
    expect(parseError(two(lora('x'), lora('a'))).message).toMatch(/adapters\[0\]\.name "a" is already the name of models\[0\] \(line 2\)/);
    expect(parseError(two(lora('x'), lora('chat'))).message).toMatch(/adapters\[0\]\.name "chat" is already an alias of model "a"/);
    const other = parseError(two(lora('x'), lora('x')));
    expect(other.field).toBe('models[1].adapters[0].name');
    expect(other.message).toMatch(/"x" is already an adapter of models\[0\] \(line 6\)/);
    expect(parseError(two(`${lora('x')}, ${lora('x')}`, lora('y'))).message).toMatch(/adapters\[1\]\.name "x" is listed twice/);
  });

  it('refuses max_loaded_adapters or adapter_routing on a model without adapters, and an unknown adapter key', () => {
    expect(parseError(oneModel([], ['max_loaded_adapters: 2'])).field).toBe('models[0].profiles[0].max_loaded_adapters');
    expect(parseError(oneModel(['adapter_routing: none'])).field).toBe('models[0].adapter_routing');
    expect(parseError(oneModel(['adapters:', '  - { name: l, source: /m/l.gguf }', 'adapter_routing: sometimes'])).message).toMatch(/adapter_routing/);
    const c = parseCatalog(oneModel(['adapters:', '  - { name: l, source: /m/l.gguf }', 'adapter_routing: none']), 'c.yaml');
    expect(c.models[0]!.adapter_routing).toBe('none');
    expect(parseError(oneModel(['adapters:', '  - { name: l, source: /m/l.gguf, scale: 2 }'])).message).toMatch(/adapters\/0|adapters\[0\]/);
  });
});
