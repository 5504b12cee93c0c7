/** Where a catalog problem is, and the one-line message an operator reads. */

/** What a `CatalogError` knows about where the problem is. */
export interface CatalogErrorDetails {
  file: string;
  /** The model's name, or its position (`models[3]`) when it has no usable name. */
  model?: string;
  /** Full path from the top of the file: `models[0].profiles[1].min_memory_gb`. */
  field?: string;
  /** The same path relative to the model: `profiles[1].min_memory_gb`. */
  modelField?: string;
  /** 1-based line of the YAML node at fault (the parent's, for a missing field). */
  line?: number;
  /** What is wrong, without the location: `must be number`. */
  problem: string;
}

/** Most problems one `CatalogError` lists; more are counted, not listed. */
export const MAX_CATALOG_PROBLEMS = 20;

/** One problem of a catalog, with the line an operator reads. */
export type CatalogProblem = CatalogErrorDetails & { message: string };

/**
 * Thrown by `parseCatalog` / `loadCatalog`, and passed to a `CatalogWatcher`'s `onError`,
 * when the catalog file cannot be read, is not YAML, does not match the schema, or
 * contradicts itself. It carries every problem found (`problems`, in file order, at most
 * `MAX_CATALOG_PROBLEMS`), so an operator fixes them in one go; its own fields are the
 * first problem's. The message is that problem's line, which an operator can act on:
 * `catalog /etc/llmgw/catalog.yaml: model "qwen" (line 12): profiles[0].min_memory_gb must be number`,
 * and says how many more there are; `lines()` gives them all.
 */
export class CatalogError extends Error {
  readonly file: string;
  readonly model?: string;
  readonly field?: string;
  readonly modelField?: string;
  readonly line?: number;
  readonly problem: string;
  readonly problems: readonly CatalogProblem[];
  /** Problems found beyond `MAX_CATALOG_PROBLEMS`. */
  readonly more: number;

  constructor(details: CatalogErrorDetails, all: { problems: CatalogErrorDetails[]; more: number } = { problems: [details], more: 0 }) {
    const problems = all.problems.map((p) => ({ ...p, message: formatCatalogError(p) }));
    const others = problems.length - 1 + all.more;
    super(formatCatalogError(details) + (others > 0 ? ` (and ${others} more ${others === 1 ? 'problem' : 'problems'})` : ''));
    this.name = 'CatalogError';
    this.file = details.file;
    this.model = details.model;
    this.field = details.field;
    this.modelField = details.modelField;
    this.line = details.line;
    this.problem = details.problem;
    this.problems = problems;
    this.more = all.more;
  }

  /**
   * One error for several problems: in file order (by line; problems without one keep
   * their place at the end), at most `MAX_CATALOG_PROBLEMS` listed.
   */
  static of(found: CatalogErrorDetails[]): CatalogError {
    const sorted = found
      .map((d, i) => ({ d, i }))
      .sort((a, b) => (a.d.line ?? Infinity) - (b.d.line ?? Infinity) || a.i - b.i)
      .map((x) => x.d);
    const problems = sorted.slice(0, MAX_CATALOG_PROBLEMS);
    const [first] = problems;
    if (!first) throw new Error('CatalogError.of needs at least one problem');
    return new CatalogError(first, { problems, more: sorted.length - problems.length });
  }

  /** Every problem's line, and one more saying how many were left out. */
  lines(): string[] {
    const lines = this.problems.map((p) => p.message);
    if (this.more > 0) lines.push(`catalog ${this.file}: ${this.more} more ${this.more === 1 ? 'problem' : 'problems'} not listed; fix these first`);
    return lines;
  }
}

function formatCatalogError(d: CatalogErrorDetails): string {
  const at = d.line === undefined ? '' : ` (line ${d.line})`;
  if (d.model !== undefined) {
    const who = /^models\[\d+\]$/.test(d.model) ? d.model : `model ${JSON.stringify(d.model)}`;
    const subject = d.modelField ? `${d.modelField} ` : '';
    return `catalog ${d.file}: ${who}${at}: ${subject}${d.problem}`;
  }
  const subject = d.field ? `${d.field} ` : '';
  return `catalog ${d.file}${at}: ${subject}${d.problem}`;
}

/** Quotes a name in a catalog message, so an empty or odd name still reads as one. */
export const q = (s: string): string => JSON.stringify(s);
