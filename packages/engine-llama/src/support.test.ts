import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { SUPPORT } from './support.js';

const ENDPOINTS = { chat: '/v1/chat/completions', completions: '/v1/completions', embeddings: '/v1/embeddings' } as const;

describe("the README's parameter table", () => {
  it("says for each parameter what the built-in engine does, as SUPPORT declares it (the engine's tests send each)", () => {
    const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
    const rows = readme
      .slice(readme.indexOf('<!-- parameters:'))
      .split('\n')
      .filter((l) => /^\| `\/v1\//.test(l))
      .map((l) => l.split('|').map((c) => c.trim()));
    for (const [key, path] of Object.entries(ENDPOINTS)) {
      const listed = Object.fromEntries(rows.filter((r) => r[1] === `\`${path}\``).map((r) => [r[2]!.replaceAll('`', ''), r[4]]));
      expect(listed).toEqual(SUPPORT[key as keyof typeof SUPPORT]);
    }
  });
});
