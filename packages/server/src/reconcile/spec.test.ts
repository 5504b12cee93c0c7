import { describe, expect, it } from '@jest/globals';
import { makeModel, makeProfile } from '../../test/factories.js';
import { specOf } from './spec.js';

describe('specOf', () => {
  it("freezes the model's adapters with their files, and how many a replica holds loaded", () => {
    const sha = 'B'.repeat(64);
    const model = makeModel({
      adapters: [
        { name: 'sql-lora', source: 'https://files.invalid/sql.gguf', sha256: sha },
        { name: 'chat-lora', source: '/models/chat.gguf' },
      ],
    });
    expect(specOf(model, makeProfile()).adapters).toEqual([
      { name: 'sql-lora', source: 'https://files.invalid/sql.gguf', file: { url: 'https://files.invalid/sql.gguf', sha256: 'b'.repeat(64) } },
      { name: 'chat-lora', source: '/models/chat.gguf' },
    ]);
    expect(specOf(model, makeProfile()).maxLoadedAdapters).toBe(8);
    expect(specOf(model, makeProfile({ max_loaded_adapters: 3 })).maxLoadedAdapters).toBe(3);
    expect(specOf(makeModel(), makeProfile())).not.toHaveProperty('adapters');
  });
});
