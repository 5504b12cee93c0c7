import { describe, expect, it } from '@jest/globals';
import { parseCatalog } from '../catalog/parse.js';
import { oneModel } from '../catalog/testing.js';
import type { Controller } from '../controller/controller.js';
import { keyModel } from './admin.js';

describe("a key's models", () => {
  const catalog = parseCatalog(oneModel(['aliases: [coder]', 'adapters:', '  - { name: sql-lora, source: /m/sql.gguf }']), 'c.yaml');
  const ctl = { catalogView: catalog } as unknown as Controller;

  it('are stored by model name, for a name or an alias, and by adapter name for an adapter', () => {
    expect(keyModel(ctl, 'm')).toBe('m');
    expect(keyModel(ctl, 'coder')).toBe('m');
    expect(keyModel(ctl, 'sql-lora')).toBe('sql-lora');
    expect(keyModel(ctl, 'nosuch')).toBeUndefined();
  });
});
