import { describe, expect, it } from '@jest/globals';
import { parseCatalog } from './catalog.js';
import { CatalogError } from './errors.js';
import { yaml } from './testing.js';

const DIGEST = 'ab'.repeat(32);

/** One model whose source (and profile lines) the case gives; its problems, or [] when it loads. */
function problems(model: string[], profile: string[] = [], rules = {}): string[] {
  const text = yaml(
    'models:',
    '  - name: m',
    ...model.map((l) => `    ${l}`),
    '    profiles:',
    '      - name: p',
    '        engine: llama.cpp',
    ...profile.map((l) => `        ${l}`),
  );
  try {
    parseCatalog(text, 'c.yaml', rules);
    return [];
  } catch (err) {
    if (err instanceof CatalogError) return err.problems.map((p) => `${p.field}: ${p.problem}`);
    throw err;
  }
}

describe('catalog: sources agents fetch', () => {
  it.each([
    ['an http URL with its digest', [`source: https://files.example/m.gguf`, `sha256: ${DIGEST}`], [], {}, []],
    ['an upper-case digest', [`source: http://files.example/m.gguf`, `sha256: ${DIGEST.toUpperCase()}`], [], {}, []],
    ['a path or hub id without a digest', ['source: /models/m.gguf'], [], {}, []],
    ['llmgw:// with --models-dir', ['source: llmgw://m.gguf', `sha256: ${DIGEST}`], [], { modelsDir: true }, []],
    ['a profile with its own URL and digest', ['source: org/m'], ['source: https://x.example/m.gguf', `sha256: ${DIGEST}`], {}, []],
    ['a model URL every profile replaces needs no digest', ['source: https://x.example/m.gguf'], ['source: /m.gguf'], {}, []],
    [
      'an http URL without its digest',
      ['source: http://files.example/m.gguf'],
      [],
      {},
      [expect.stringMatching(/^models\[0\]\.sha256: is required with an http\(s\):\/\/ or llmgw:\/\/ source/)],
    ],
    [
      'a profile URL without its digest',
      ['source: org/m'],
      ['source: https://x.example/m.gguf'],
      {},
      [expect.stringMatching(/^models\[0\]\.profiles\[0\]\.sha256: is required/)],
    ],
    [
      'a digest beside a path',
      ['source: /models/m.gguf', `sha256: ${DIGEST}`],
      [],
      {},
      ['models[0].sha256: is only used with an http(s):// or llmgw:// source, which agents fetch and verify; remove it, or give the file as a URL'],
    ],
    [
      'a profile digest without a profile source',
      [`source: https://x.example/m.gguf`, `sha256: ${DIGEST}`],
      [`sha256: ${DIGEST}`],
      {},
      [expect.stringMatching(/^models\[0\]\.profiles\[0\]\.sha256: is the digest of the profile's own source/)],
    ],
    [
      'llmgw:// without --models-dir',
      ['source: llmgw://m.gguf', `sha256: ${DIGEST}`],
      [],
      {},
      [
        "models[0].source: llmgw://m.gguf is served from the server's --models-dir: start llmgw-server with --models-dir DIR holding m.gguf, or use an http(s):// URL",
      ],
    ],
    [
      'llmgw:// out of the directory',
      ['source: llmgw://../etc/passwd', `sha256: ${DIGEST}`],
      [],
      { modelsDir: true },
      ['models[0].source: llmgw:// "../etc/passwd" has a path in it: name one file directly in --models-dir'],
    ],
    [
      'llmgw:// naming no file',
      ['source: llmgw://', `sha256: ${DIGEST}`],
      [],
      { modelsDir: true },
      ['models[0].source: llmgw:// names no file: write llmgw://FILE, a file in --models-dir'],
    ],
  ])('%s', (_name, model, profile, rules, expected) => {
    expect(problems(model, profile, rules)).toEqual(expected);
  });

  it('a digest that is not 64 hex digits is a schema problem', () => {
    expect(problems(['source: https://x.example/m.gguf', 'sha256: abc'])).toEqual([
      'models[0].sha256: must be a SHA-256 digest: 64 hex digits, as sha256sum prints it',
    ]);
  });
});
