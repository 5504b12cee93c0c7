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

/**
 * Thrown by `parseCatalog` / `loadCatalog`, and passed to a `CatalogWatcher`'s `onError`,
 * when the catalog file cannot be read, is not YAML, does not match the schema, or
 * contradicts itself. The message is one line an operator can act on:
 * `catalog /etc/llmgw/catalog.yaml: model "qwen" (line 12): profiles[0].min_memory_gb must be number`.
 */
export class CatalogError extends Error {
  readonly file: string;
  readonly model?: string;
  readonly field?: string;
  readonly modelField?: string;
  readonly line?: number;
  readonly problem: string;

  constructor(details: CatalogErrorDetails) {
    super(formatCatalogError(details));
    this.name = 'CatalogError';
    this.file = details.file;
    this.model = details.model;
    this.field = details.field;
    this.modelField = details.modelField;
    this.line = details.line;
    this.problem = details.problem;
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
