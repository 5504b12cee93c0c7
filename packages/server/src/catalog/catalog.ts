import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { CatalogSchema, ModelSchema, ProfileSchema, validate } from '@llmgw/shared';
import type { Catalog, Model, Profile } from '@llmgw/shared';
import { LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument, type Document, type Pair } from 'yaml';

/** A profile as the loader hands it out: the optional lists and counts filled in. */
export type CatalogProfile = Profile & {
  gpus: number;
  shards: number;
  args: string[];
  env: Record<string, string>;
  node_selector: Record<string, string>;
};

/** A model as the loader hands it out: still a `Model`, with its defaults made explicit. */
export type CatalogModel = Omit<Model, 'profiles'> & {
  aliases: string[];
  fallbacks: string[];
  scaling: { min: number; max: number };
  profiles: CatalogProfile[];
};

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

/**
 * A parsed, checked catalog. Build one with `parseCatalog` or `loadCatalog`; the
 * constructor trusts that its models have passed those checks.
 */
export class LoadedCatalog {
  /** Models in file order. */
  readonly models: CatalogModel[];
  readonly byName: Map<string, CatalogModel>;
  private readonly byAlias: Map<string, CatalogModel>;

  constructor(
    readonly file: string,
    models: CatalogModel[],
  ) {
    this.models = models;
    this.byName = new Map(models.map((m) => [m.name, m]));
    this.byAlias = new Map(models.flatMap((m) => m.aliases.map((a): [string, CatalogModel] => [a, m])));
  }

  /** The model with this name or alias. Names win, though the loader forbids overlaps. */
  resolve(nameOrAlias: string): CatalogModel | undefined {
    return this.byName.get(nameOrAlias) ?? this.byAlias.get(nameOrAlias);
  }

  /**
   * Up to three names or aliases close to `name`, closest first, at most one per model,
   * for "did you mean" messages. Case is ignored, and a name that contains what was
   * typed (`qwen` → `qwen-coder-14b`) counts as close even when the edit distance is large.
   */
  suggest(name: string): string[] {
    const query = name.toLowerCase();
    const limit = Math.max(2, Math.floor(query.length / 3));
    const best = new Map<CatalogModel, { text: string; distance: number }>();
    for (const model of this.models) {
      for (const text of [model.name, ...model.aliases]) {
        const candidate = text.toLowerCase();
        const distance = editDistance(query, candidate);
        const contains = query.length >= 3 && (candidate.includes(query) || query.includes(candidate));
        if (distance > limit && !contains) continue;
        const seen = best.get(model);
        if (!seen || distance < seen.distance) best.set(model, { text, distance });
      }
    }
    return [...best.values()]
      .sort((a, b) => a.distance - b.distance || a.text.localeCompare(b.text))
      .slice(0, 3)
      .map((s) => s.text);
  }
}

/** Levenshtein distance, two rows at a time. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

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

/**
 * A required key is often missing only because it is misspelt next door (`engin: vllm`);
 * ajv reports the missing key first, so point at the likely typo.
 */
function misspelling(data: unknown, field: string): string {
  const [parentPath, missing] = splitLast(field);
  const parent = valueAt(data, parentPath);
  if (typeof parent !== 'object' || parent === null || Array.isArray(parent)) return '';
  const known = knownKeys(parentPath);
  const near = Object.keys(parent).find((k) => !known.includes(k) && editDistance(k, missing) <= 2);
  return near === undefined ? '' : ` (is ${q(near)} a typo?)`;
}

/** For an unknown key, the known key of that object closest to it. */
function didYouMean(field: string): string {
  const [parentPath, unknown] = splitLast(field);
  const near = knownKeys(parentPath)
    .map((k) => ({ k, d: editDistance(k, unknown) }))
    .filter((c) => c.d <= 2)
    .sort((a, b) => a.d - b.d)[0];
  return near ? ` (did you mean ${near.k}?)` : '';
}

/** `models[0].profiles[1].engine` → [`models[0].profiles[1]`, `engine`]. */
function splitLast(field: string): [string, string] {
  const dot = field.lastIndexOf('.');
  return dot < 0 ? ['', field] : [field.slice(0, dot), field.slice(dot + 1)];
}

/** The keys the schema allows in the object at `path`. */
function knownKeys(path: string): string[] {
  return /profiles\[\d+\]$/.test(path)
    ? Object.keys(ProfileSchema.properties)
    : /^models\[\d+\]$/.test(path)
      ? Object.keys(ModelSchema.properties)
      : path.endsWith('.scaling')
        ? ['min', 'max']
        : path === ''
          ? Object.keys(CatalogSchema.properties)
          : [];
}

/** Follows a validator path through parsed data; the paths of required fields hold no dotted keys. */
function valueAt(data: unknown, path: string): unknown {
  let value = data;
  for (const part of path.match(/[^.[\]]+/g) ?? []) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Reads and parses a catalog file; an unreadable file is a `CatalogError` too. */
export async function loadCatalog(file: string): Promise<LoadedCatalog> {
  return parseCatalog(await readCatalogText(file), file);
}

async function readCatalogText(file: string): Promise<string> {
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

/**
 * The rules the schema cannot express because they relate fields or models to each
 * other. Reports the first problem in file order through `fail`, which does not return.
 */
function crossCheck(
  models: CatalogModel[],
  fail: (field: string, problem: string) => never,
  lineOf: (field: string) => number,
): void {
  const firstByName = new Map<string, number>();
  models.forEach((m, i) => {
    const earlier = firstByName.get(m.name);
    if (earlier !== undefined) {
      const line = lineOf(`models[${earlier}]`);
      fail(`models[${i}].name`, `${q(m.name)} is already used by models[${earlier}] (line ${line})`);
    }
    firstByName.set(m.name, i);
  });

  const aliasOwner = new Map<string, { model: number; alias: number }>();
  models.forEach((m, i) => {
    const at = `models[${i}]`;
    if (m.scaling.min > m.scaling.max) {
      fail(`${at}.scaling.min`, `(${m.scaling.min}) is greater than scaling.max (${m.scaling.max})`);
    }

    const profileNames = new Map<string, number>();
    m.profiles.forEach((p, j) => {
      const pat = `${at}.profiles[${j}]`;
      const earlier = profileNames.get(p.name);
      if (earlier !== undefined) {
        const line = lineOf(`${at}.profiles[${earlier}]`);
        fail(`${pat}.name`, `${q(p.name)} is already used by profiles[${earlier}] (line ${line})`);
      }
      profileNames.set(p.name, j);
      if (p.engine === 'command' && !p.command) fail(`${pat}.command`, 'is required with engine command');
      if (p.engine !== 'command' && p.command) {
        fail(`${pat}.command`, `is only used with engine command, not ${p.engine}`);
      }
      // Placement needs every shard of a replica on one interconnect (DESIGN §3).
      if (p.shards > 1 && !p.fabric) fail(`${pat}.fabric`, `is required when shards > 1 (shards: ${p.shards})`);
      // Without gpus the profile is placed on CPU and these would be silently ignored.
      if (p.gpus === 0 && p.gpu_class) fail(`${pat}.gpu_class`, 'needs gpus > 0 (with gpus 0 the profile runs on CPU)');
      if (p.gpus === 0 && p.min_gpu_memory_gb !== undefined) {
        fail(`${pat}.min_gpu_memory_gb`, 'needs gpus > 0 (with gpus 0 the profile runs on CPU)');
      }
    });

    m.aliases.forEach((a, j) => {
      const field = `${at}.aliases[${j}]`;
      const named = firstByName.get(a);
      if (named === i) fail(field, `${q(a)} is the model's own name`);
      if (named !== undefined) {
        fail(field, `${q(a)} is already the name of models[${named}] (line ${lineOf(`models[${named}]`)})`);
      }
      const other = aliasOwner.get(a);
      if (other?.model === i) fail(field, `${q(a)} is listed twice`);
      if (other) {
        const line = lineOf(`models[${other.model}].aliases[${other.alias}]`);
        fail(field, `${q(a)} is already an alias of model ${q(models[other.model].name)} (line ${line})`);
      }
      aliasOwner.set(a, { model: i, alias: j });
    });
  });

  models.forEach((m, i) => {
    const seen = new Set<string>();
    m.fallbacks.forEach((f, j) => {
      const field = `models[${i}].fallbacks[${j}]`;
      if (f === m.name) fail(field, `${q(f)} is the model itself`);
      if (seen.has(f)) fail(field, `${q(f)} is listed twice`);
      seen.add(f);
      if (firstByName.has(f)) return;
      const owner = aliasOwner.get(f);
      if (owner) fail(field, `${q(f)} is an alias; name the model ${q(models[owner.model].name)}`);
      // Suggest model names only: an alias would be rejected here too.
      const known = new LoadedCatalog('', models);
      const close = known.suggest(f).map((s) => known.resolve(s)?.name ?? s);
      const hint = close.length ? ` (did you mean ${close.map(q).join(', ')}?)` : '';
      fail(field, `${q(f)} is not a model in this catalog${hint}`);
    });
  });

  const cycle = findFallbackCycle(models, firstByName);
  if (cycle) {
    const [start, next] = cycle;
    const target = models[next].name;
    const path = [...cycle, start].map((k) => models[k].name).join(' → ');
    const entry = models[start].fallbacks.indexOf(target);
    fail(`models[${start}].fallbacks[${entry}]`, `${q(target)} makes a cycle: ${path}`);
  }
}

/**
 * The first fallback cycle as model indexes, rotated to start at the model that comes
 * first in the file, so the same catalog always reports the same cycle the same way.
 */
function findFallbackCycle(models: CatalogModel[], index: Map<string, number>): number[] | undefined {
  const state = new Array<'new' | 'open' | 'done'>(models.length).fill('new');
  const stack: number[] = [];
  const visit = (i: number): number[] | undefined => {
    state[i] = 'open';
    stack.push(i);
    for (const f of models[i].fallbacks) {
      const k = index.get(f);
      if (k === undefined) continue;
      if (state[k] === 'open') return stack.slice(stack.indexOf(k));
      if (state[k] === 'new') {
        const found = visit(k);
        if (found) return found;
      }
    }
    stack.pop();
    state[i] = 'done';
    return undefined;
  };
  for (let i = 0; i < models.length; i++) {
    if (state[i] !== 'new') continue;
    const cycle = visit(i);
    if (cycle) {
      const first = cycle.indexOf(Math.min(...cycle));
      return [...cycle.slice(first), ...cycle.slice(0, first)];
    }
  }
  return undefined;
}

const q = (s: string): string => JSON.stringify(s);

/** With `merge` on, the parser turns a `<<` key into a symbol. */
const isMergeKey = (key: unknown): boolean => {
  if (!isScalar(key)) return false;
  return key.value === '<<' || (typeof key.value === 'symbol' && key.value.description === '<<');
};

/**
 * Maps a validator field path (`models[0].profiles[1].min_memory_gb`) back to the YAML
 * node it came from, to tell the operator which line to look at.
 */
class Locator {
  constructor(
    private readonly doc: Document,
    private readonly lineAt: (offset: number) => number,
  ) {}

  /** The line of the deepest node on the path that exists: the parent's, for a missing key. */
  line(field: string): number {
    let node: unknown = this.doc.contents;
    let line = this.nodeLine(node) ?? 1;
    let rest = field;
    while (rest) {
      node = this.deref(node);
      const item = /^\[(\d+)\]/.exec(rest);
      if (item) {
        const next = isSeq(node) ? node.items[Number(item[1])] : undefined;
        if (next === undefined) break;
        node = next;
        line = this.nodeLine(next) ?? line;
        rest = rest.slice(item[0].length);
        continue;
      }
      rest = rest.replace(/^\./, '');
      const found = this.findKey(node, rest);
      if (!found) break;
      node = found.pair.value;
      line = this.nodeLine(found.pair.key) ?? this.nodeLine(found.pair.value) ?? line;
      rest = rest.slice(found.key.length);
    }
    return line;
  }

  /**
   * The pair whose key starts `rest`. Keys may contain dots (`kubernetes.io/role` in a
   * node_selector), so the path cannot simply be split: match the document's own keys,
   * longest first, then look through `<<` merges.
   */
  private findKey(node: unknown, rest: string): { pair: Pair; key: string } | undefined {
    if (!isMap(node)) return undefined;
    let best: { pair: Pair; key: string } | undefined;
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const ends = rest.length === key.length || rest[key.length] === '.' || rest[key.length] === '[';
      if (rest.startsWith(key) && ends && key.length > (best?.key.length ?? -1)) best = { pair, key };
    }
    if (best) return best;
    for (const pair of node.items) {
      if (!isMergeKey(pair.key)) continue;
      const sources = this.deref(pair.value);
      for (const source of isSeq(sources) ? sources.items : [sources]) {
        const found = this.findKey(this.deref(source), rest);
        if (found) return found;
      }
    }
    return undefined;
  }

  private deref(node: unknown): unknown {
    return isAlias(node) ? node.resolve(this.doc) : node;
  }

  private nodeLine(node: unknown): number | undefined {
    const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
    return range ? this.lineAt(range[0]) : undefined;
  }
}

/** Callbacks and tuning for a `CatalogWatcher`. */
export interface CatalogWatcherOptions {
  /** A reload produced a catalog whose models differ from the running one. */
  onChange: (catalog: LoadedCatalog, previous: LoadedCatalog) => void;
  /** A reload failed; the running catalog stays in force. */
  onError: (error: CatalogError) => void;
  /** Quiet time after a file event before reloading; editors write in bursts. Default 100. */
  debounceMs?: number;
  /** Interval of the mtime/size/inode poll; 0 turns it off. Default 2000. */
  pollMs?: number;
  /** Use fs.watch on the file's directory. Default true. */
  fsWatch?: boolean;
}

/**
 * Keeps a catalog file loaded: reloads on `reload()` (wire SIGHUP to it) and when the
 * file changes. A reload that fails leaves the running catalog in place and reports
 * through `onError`; one that yields the same models does not call `onChange`.
 */
export class CatalogWatcher {
  private catalog: LoadedCatalog;
  private text: string;
  private signature: string;
  /** What the last failed background reload saw, so a broken file is reported once. */
  private failedOn?: string;
  private queue: Promise<unknown> = Promise.resolve();
  private debounce?: NodeJS.Timeout;
  private poller?: NodeJS.Timeout;
  private watcher?: FSWatcher;
  private closed = false;

  private constructor(
    readonly file: string,
    private readonly options: CatalogWatcherOptions,
    initial: { catalog: LoadedCatalog; text: string; signature: string },
  ) {
    this.catalog = initial.catalog;
    this.text = initial.text;
    this.signature = initial.signature;
  }

  /**
   * Loads `file` and starts watching it. Throws `CatalogError` when the first load
   * fails: a server should not start on a catalog it cannot read.
   */
  static async start(file: string, options: CatalogWatcherOptions): Promise<CatalogWatcher> {
    const signature = await signatureOf(file);
    const text = await readCatalogText(file);
    const watcher = new CatalogWatcher(file, options, { catalog: parseCatalog(text, file), text, signature });
    watcher.watch();
    return watcher;
  }

  /** The catalog in force. */
  get current(): LoadedCatalog {
    return this.catalog;
  }

  /**
   * Rereads the file now. Resolves true when a new catalog took effect (and `onChange`
   * was called), false when the file was unchanged or broken (`onError` was called).
   */
  reload(): Promise<boolean> {
    return this.enqueue(true);
  }

  /** Stops watching; pending and later reloads do nothing. */
  close(): void {
    this.closed = true;
    clearTimeout(this.debounce);
    clearInterval(this.poller);
    this.watcher?.close();
    this.watcher = undefined;
  }

  private watch(): void {
    const name = basename(this.file);
    if (this.options.fsWatch ?? true) {
      try {
        // The directory, not the file: editors and config management replace the file by
        // rename, which ends a watch on the old inode.
        this.watcher = watch(dirname(this.file), { persistent: false }, (_event, changed) => {
          if (changed === null || changed === name) this.schedule();
        });
        // Some filesystems (NFS, some container mounts) cannot be watched; the poll covers them.
        this.watcher.on('error', () => {
          this.watcher?.close();
          this.watcher = undefined;
        });
      } catch {
        this.watcher = undefined;
      }
    }
    const pollMs = this.options.pollMs ?? 2000;
    if (pollMs > 0) {
      // Also catches a symlink swapped above the file (Kubernetes ConfigMap volumes).
      this.poller = setInterval(() => void this.poll(), pollMs);
      this.poller.unref();
    }
  }

  private async poll(): Promise<void> {
    const now = await signatureOf(this.file);
    if (this.closed || now === this.signature) return;
    // Remember what was seen, or every poll until the reload runs would restart the debounce.
    this.signature = now;
    this.schedule();
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.enqueue(false).catch((err: unknown) => {
        // Only a throwing callback gets here; surface it rather than lose it.
        this.options.onError(
          new CatalogError({ file: this.file, problem: `reload failed: ${(err as Error).message ?? String(err)}` }),
        );
      });
    }, this.options.debounceMs ?? 100);
    this.debounce.unref();
  }

  /** Reloads one at a time, so an old read never overwrites a newer one. */
  private enqueue(explicit: boolean): Promise<boolean> {
    const run = this.queue.then(() => this.check(explicit));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async check(explicit: boolean): Promise<boolean> {
    if (this.closed) return false;
    const signature = await signatureOf(this.file);
    let text: string;
    try {
      text = await readCatalogText(this.file);
    } catch (err) {
      this.signature = signature;
      return this.failed(err as CatalogError, `\0${signature}`, explicit);
    }
    this.signature = signature;
    if (text === this.text) {
      this.failedOn = undefined;
      return false;
    }
    let next: LoadedCatalog;
    try {
      next = parseCatalog(text, this.file);
    } catch (err) {
      if (!(err instanceof CatalogError)) throw err;
      return this.failed(err, text, explicit);
    }
    this.failedOn = undefined;
    this.text = text;
    // A comment or formatting edit is not a change anyone downstream needs to act on.
    if (JSON.stringify(next.models) === JSON.stringify(this.catalog.models)) return false;
    const previous = this.catalog;
    this.catalog = next;
    this.options.onChange(next, previous);
    return true;
  }

  private failed(error: CatalogError, seen: string, explicit: boolean): false {
    // An operator's SIGHUP always gets an answer; repeated file events for the same broken
    // content do not repeat the same complaint.
    if (explicit || seen !== this.failedOn) this.options.onError(error);
    this.failedOn = seen;
    return false;
  }
}

async function signatureOf(file: string): Promise<string> {
  try {
    const s = await stat(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch (err) {
    return `missing:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
  }
}
