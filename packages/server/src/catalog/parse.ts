import { readFile } from 'node:fs/promises';
import { CatalogSchema, validateAll } from '@llmgw/shared';
import type { Catalog, ValidationFailure } from '@llmgw/shared';
import { LineCounter, parseDocument } from 'yaml';
import { crossCheck, type CatalogRules } from './cross-check.js';
import { CatalogError, type CatalogErrorDetails } from './errors.js';
import { LoadedCatalog, type CatalogModel } from './loaded.js';
import { Locator } from './locate.js';
import { closestOption, didYouMean, misspelling, quoteHint } from './suggest.js';

/**
 * Parses and checks catalog text. `file` is only used in error messages.
 * Throws one `CatalogError` with every problem found, each naming the file, model, field
 * and line: all YAML syntax errors; else every schema problem; else, once the schema
 * holds (the rules between fields need well-typed fields), every cross-check problem.
 * `rules` says what the server offers that a catalog may rely on (`--models-dir`).
 */
export function parseCatalog(text: string, file: string, rules: CatalogRules = {}): LoadedCatalog {
  const lines = new LineCounter();
  // `merge` lets operators share settings between profiles with `<<: *defaults`.
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, merge: true });
  const lineAt = (offset: number): number => lines.linePos(offset).line;

  if (doc.errors.length) {
    // An error found at the end of the text (an unclosed quote or bracket) is at the
    // offset past the final newline, a line the file does not have: say its last line.
    const lastLine = lineAt(text.trimEnd().length);
    throw CatalogError.of(doc.errors.map((e) => ({ file, line: Math.min(lineAt(e.pos[0]), lastLine), problem: `YAML syntax error: ${e.message}` })));
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
  const at = (field: string, problem: string): CatalogErrorDetails => {
    const line = locator.line(field);
    const m = /^models\[(\d+)\]/.exec(field);
    if (!m) return { file, field, line, problem };
    const entry = (data as { models?: unknown[] }).models?.[Number(m[1])];
    const name = (entry as { name?: unknown } | undefined)?.name;
    const model = typeof name === 'string' && name !== '' ? name : m[0];
    const rest = field.slice(m[0].length).replace(/^\./, '');
    return { file, model, field, modelField: rest || undefined, line, problem };
  };

  const checked = validateAll(CatalogSchema, data);
  if (!checked.ok) {
    if (checked.errors.some((e) => e.field === '(body)')) {
      throw new CatalogError({ file, line: 1, problem: 'the top level must be a mapping with a models: list' });
    }
    throw CatalogError.of(schemaProblems(data, checked.errors).map((p) => at(p.field, p.problem)));
  }

  const models = checked.value.models.map(withDefaults);
  const found: CatalogErrorDetails[] = [];
  crossCheck(
    models,
    (field, problem) => void found.push(at(field, problem)),
    (field) => locator.line(field),
    rules,
  );
  if (found.length) throw CatalogError.of(found);
  return new LoadedCatalog(file, models);
}

/**
 * The validator's failures as problems, each with its hint. A key misspelt next to the
 * required one it stands for is one mistake: the "is required (is "engin" a typo?)" says
 * it, so its "is not a known field" is dropped.
 */
function schemaProblems(data: unknown, failures: ValidationFailure[]): { field: string; problem: string }[] {
  const typos = new Set<string>();
  const problems = failures.map(({ field, message, options }) => {
    if (message === 'is required') {
      const { hint, key } = misspelling(data, field);
      if (key !== undefined) typos.add(field.slice(0, field.length - field.split('.').pop()!.length) + key);
      return { field, problem: message + hint };
    }
    if (message === 'is not a known field') return { field, problem: message + didYouMean(field) };
    if (options) return { field, problem: message + closestOption(data, field, options) };
    if (message === 'must be string') return { field, problem: message + quoteHint(data, field) };
    return { field, problem: message };
  });
  return problems.filter((p) => !(typos.has(p.field) && p.problem.startsWith('is not a known field')));
}

/** Reads and parses a catalog file; an unreadable file is a `CatalogError` too. */
export async function loadCatalog(file: string, rules: CatalogRules = {}): Promise<LoadedCatalog> {
  return parseCatalog(await readCatalogText(file), file, rules);
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
