import { readFile } from 'node:fs/promises';
import { CatalogSchema, validate } from '@llmgw/shared';
import type { Catalog } from '@llmgw/shared';
import { LineCounter, parseDocument } from 'yaml';
import { crossCheck } from './cross-check.js';
import { CatalogError } from './errors.js';
import { LoadedCatalog, type CatalogModel } from './loaded.js';
import { Locator } from './locate.js';
import { didYouMean, misspelling } from './suggest.js';

/**
 * Parses and checks catalog text. `file` is only used in error messages.
 * Throws `CatalogError` naming the file, model, field and line of the first problem.
 */
export function parseCatalog(text: string, file: string): LoadedCatalog {
  const lines = new LineCounter();
  // `merge` lets operators share settings between profiles with `<<: *defaults`.
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, merge: true });
  const lineAt = (offset: number): number => lines.linePos(offset).line;

  const syntax = doc.errors[0];
  if (syntax) {
    throw new CatalogError({ file, line: lineAt(syntax.pos[0]), problem: `YAML syntax error: ${syntax.message}` });
  }
  let data: unknown;
  try {
    data = doc.toJS();
  } catch (err) {
    // toJS refuses documents that expand aliases exponentially ("billion laughs").
    throw new CatalogError({ file, line: 1, problem: `YAML error: ${(err as Error).message}` });
  }
  if (data === null || data === undefined) {
    throw new CatalogError({ file, field: 'models', line: 1, problem: 'is required (the file is empty)' });
  }

  const locator = new Locator(doc, lineAt);
  const fail = (field: string, problem: string): CatalogError => {
    const line = locator.line(field);
    const m = /^models\[(\d+)\]/.exec(field);
    if (!m) return new CatalogError({ file, field, line, problem });
    const entry = (data as { models?: unknown[] }).models?.[Number(m[1])];
    const name = (entry as { name?: unknown } | undefined)?.name;
    const model = typeof name === 'string' && name !== '' ? name : m[0];
    const rest = field.slice(m[0].length).replace(/^\./, '');
    return new CatalogError({ file, model, field, modelField: rest || undefined, line, problem });
  };

  const checked = validate(CatalogSchema, data);
  if (!checked.ok) {
    const { field, message } = checked.error;
    if (field === '(body)') {
      throw new CatalogError({ file, line: 1, problem: 'the top level must be a mapping with a models: list' });
    }
    if (message === 'is required') throw fail(field, message + misspelling(data, field));
    if (message === 'is not a known field') throw fail(field, message + didYouMean(field));
    throw fail(field, message);
  }

  const models = checked.value.models.map(withDefaults);
  crossCheck(
    models,
    (field, problem) => {
      throw fail(field, problem);
    },
    (field) => locator.line(field),
  );
  return new LoadedCatalog(file, models);
}

/** Reads and parses a catalog file; an unreadable file is a `CatalogError` too. */
export async function loadCatalog(file: string): Promise<LoadedCatalog> {
  return parseCatalog(await readCatalogText(file), file);
}

/** The file's text; an unreadable file is a `CatalogError`. */
export async function readCatalogText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new CatalogError({ file, problem: `cannot be read: ${(err as Error).message}` });
  }
}

function withDefaults(m: Catalog['models'][number]): CatalogModel {
  return {
    ...m,
    aliases: m.aliases ?? [],
    fallbacks: m.fallbacks ?? [],
    scaling: m.scaling ?? { min: 1, max: 1 },
    profiles: m.profiles.map((p) => ({
      ...p,
      gpus: p.gpus ?? 0,
      shards: p.shards ?? 1,
      args: p.args ?? [],
      env: p.env ?? {},
      node_selector: p.node_selector ?? {},
    })),
  };
}
