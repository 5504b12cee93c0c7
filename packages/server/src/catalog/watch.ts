import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { CatalogError } from './errors.js';
import type { LoadedCatalog } from './loaded.js';
import type { CatalogRules } from './cross-check.js';
import { parseCatalog, readCatalogText } from './parse.js';

/**
 * What a catalog status is read from: the watcher of the catalog file (`CatalogWatcher`),
 * absent when the server runs without `--catalog`.
 */
export interface CatalogStatusSource {
  readonly current: { file: string; models: readonly unknown[] };
  readonly loadedAtMs: number;
  readonly failure?: { atMs: number; error: CatalogError };
}

/** Callbacks and tuning for a `CatalogWatcher`. */
export interface CatalogWatcherOptions {
  /** A reload produced a catalog whose models differ from the running one. */
  onChange: (catalog: LoadedCatalog, previous: LoadedCatalog) => void;
  /** A reload failed; the running catalog stays in force. */
  onError: (error: CatalogError) => void;
  /**
   * After a failed reload, one that succeeded without changing the models (the fix put
   * back what runs, or only comments differ): the failure is over, with nothing to apply.
   */
  onRecover?: (catalog: LoadedCatalog) => void;
  /** The clock of `loadedAtMs` and `failure`. Default `Date.now`. */
  now?: () => number;
  /** Quiet time after a file event before reloading; editors write in bursts. Default 100. */
  debounceMs?: number;
  /** Interval of the mtime/size/inode poll; 0 turns it off. Default 2000. */
  pollMs?: number;
  /** Use fs.watch on the file's directory. Default true. */
  fsWatch?: boolean;
  /** What the server offers that the catalog may rely on (`--models-dir`), for every load. */
  rules?: CatalogRules;
}

/** The latest reload's failure, kept until a reload succeeds. */
export interface CatalogFailure {
  atMs: number;
  error: CatalogError;
}

/**
 * Keeps a catalog file loaded: reloads on `reload()` (wire SIGHUP to it) and when the
 * file changes. A reload that fails leaves the running catalog in place, reports through
 * `onError` and is kept in `failure` (for `ctl models` and the dashboard) until a reload
 * succeeds; one that yields the same models does not call `onChange`.
 */
export class CatalogWatcher {
  private catalog: LoadedCatalog;
  private loadedAt: number;
  private failing?: CatalogFailure;
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
    this.loadedAt = this.now();
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
    const watcher = new CatalogWatcher(file, options, { catalog: parseCatalog(text, file, options.rules), text, signature });
    watcher.watch();
    return watcher;
  }

  /** The catalog in force. */
  get current(): LoadedCatalog {
    return this.catalog;
  }

  /** When the catalog in force was loaded. */
  get loadedAtMs(): number {
    return this.loadedAt;
  }

  /** The latest reload's failure while no reload has succeeded since; else undefined. */
  get failure(): CatalogFailure | undefined {
    return this.failing;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
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
        this.options.onError(new CatalogError({ file: this.file, problem: `reload failed: ${(err as Error).message ?? String(err)}` }));
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
    if (text === this.text) return this.succeeded(false);
    let next: LoadedCatalog;
    try {
      next = parseCatalog(text, this.file, this.options.rules);
    } catch (err) {
      if (!(err instanceof CatalogError)) throw err;
      return this.failed(err, text, explicit);
    }
    this.text = text;
    // A comment or formatting edit is not a change anyone downstream needs to act on.
    if (JSON.stringify(next.models) === JSON.stringify(this.catalog.models)) return this.succeeded(false);
    const previous = this.catalog;
    this.catalog = next;
    this.loadedAt = this.now();
    this.succeeded(true);
    this.options.onChange(next, previous);
    return true;
  }

  /** Ends a failure; without a change to apply, says so through `onRecover`. */
  private succeeded(changed: boolean): boolean {
    const recovered = this.failing !== undefined;
    this.failedOn = undefined;
    this.failing = undefined;
    if (recovered && !changed) this.options.onRecover?.(this.catalog);
    return changed;
  }

  private failed(error: CatalogError, seen: string, explicit: boolean): false {
    // An operator's SIGHUP always gets an answer; repeated file events for the same broken
    // content do not repeat the same complaint.
    if (explicit || seen !== this.failedOn) this.options.onError(error);
    // The time of the latest try that found it broken, as the operator saw it in the log.
    if (explicit || seen !== this.failedOn || !this.failing) this.failing = { atMs: this.now(), error };
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
