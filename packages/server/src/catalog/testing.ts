import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CatalogError } from './errors.js';
import { loadCatalog, parseCatalog } from './parse.js';

// Shared by the catalog's test files: catalog text built line by line, and the error a
// catalog is rejected with.

/** The catalog files under test/catalogs. */
const fixtures = fileURLToPath(new URL('../../test/catalogs/', import.meta.url));
export const fixture = (name: string): string => join(fixtures, name);

/** Joins lines, so a test can count them: line N is `lines[N - 1]`. */
export const yaml = (...lines: string[]): string => lines.join('\n') + '\n';

/** The error `text` is rejected with; fails the test when it parses. */
export function parseError(text: string): CatalogError {
  try {
    parseCatalog(text, 'c.yaml');
  } catch (err) {
    if (err instanceof CatalogError) return err;
    throw err;
  }
  throw new Error('expected the catalog to be rejected');
}

/** The error the fixture file `name` is rejected with; fails the test when it loads. */
export async function loadError(name: string): Promise<CatalogError> {
  const err = await loadCatalog(fixture(name)).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof CatalogError) return err;
  throw new Error(`expected ${name} to be rejected, got ${String(err)}`);
}

/** One model with one profile; `extra` lines go into the model, `profile` lines into its profile. */
export const oneModel = (extra: string[] = [], profile: string[] = []): string =>
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
