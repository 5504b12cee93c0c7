import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { writePrivateFile, type CachedFile } from '@llmgw/shared';

/** One verified file in the index. */
interface Entry {
  source: string;
  size_bytes: number;
  last_used_ms: number;
}

const HEX64 = /^[0-9a-f]{64}$/;
/** The last time a Date can hold (ECMA-262), as `CachedFileSchema` bounds `last_used_ms`. */
const MAX_DATE_MS = 8.64e15;

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * The agent's model cache (`--model-cache`): verified files stored by content,
 * `<dir>/sha256/<hex>`, so two sources of the same bytes are one file and a file's name
 * says what it must hash to. `<dir>/index.json` keeps each file's source and last use for
 * `NodeReport.files` and eviction. Only verified files are ever in `sha256/`: a transfer
 * lands in `<dir>/partial/<hex>` first and is renamed once its digest matches.
 */
export class ModelCache {
  private entries = new Map<string, Entry>();

  constructor(
    readonly dir: string,
    /** `--model-cache-max` in bytes; undefined: unbounded. */
    private readonly maxBytes: number | undefined,
    private readonly log: Logger,
  ) {
    // Engines run as another user (`--engine-user`) and the service's umask is 0077:
    // chmod, which the umask does not touch, lets them reach and read the files.
    for (const d of [dir, path.join(dir, 'sha256')]) {
      fs.mkdirSync(d, { recursive: true });
      fs.chmodSync(d, 0o755);
    }
    fs.mkdirSync(path.join(dir, 'partial'), { recursive: true });
    this.entries = this.load();
  }

  /** Where a verified file with this digest lives. */
  pathOf(sha256: string): string {
    return path.join(this.dir, 'sha256', sha256.toLowerCase());
  }

  /** Where a transfer of it is written until verified (kept across restarts, to resume). */
  partialOf(sha256: string): string {
    return path.join(this.dir, 'partial', sha256.toLowerCase());
  }

  /** The verified file's path when the cache holds it; records the use. */
  use(sha256: string): string | undefined {
    const key = sha256.toLowerCase();
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (!fs.existsSync(this.pathOf(key))) {
      // Someone deleted it by hand: forget it, and fetch again.
      this.entries.delete(key);
      this.save();
      return undefined;
    }
    e.last_used_ms = Date.now();
    this.save();
    return this.pathOf(key);
  }

  /**
   * Moves a verified partial into the cache, after evicting what must go to make room.
   * `inUse` holds the digests shards use now; those are never evicted.
   */
  add(sha256: string, source: string, inUse: ReadonlySet<string>): string {
    const key = sha256.toLowerCase();
    const size = fs.statSync(this.partialOf(key)).size;
    this.evict(inUse, size, key);
    fs.renameSync(this.partialOf(key), this.pathOf(key));
    fs.chmodSync(this.pathOf(key), 0o644);
    this.entries.set(key, { source, size_bytes: size, last_used_ms: Date.now() });
    this.save();
    return this.pathOf(key);
  }

  /**
   * Deletes least recently used files that no shard uses until `incoming` more bytes fit
   * under the bound. Files in use stay even when that leaves the cache over its bound:
   * a running engine reads them.
   */
  evict(inUse: ReadonlySet<string>, incoming = 0, keep?: string): void {
    if (this.maxBytes === undefined) return;
    let total = incoming + [...this.entries.values()].reduce((n, e) => n + e.size_bytes, 0);
    const idle = [...this.entries.entries()].filter(([k]) => !inUse.has(k) && k !== keep).sort((a, b) => a[1].last_used_ms - b[1].last_used_ms);
    for (const [key, e] of idle) {
      if (total <= this.maxBytes) break;
      fs.rmSync(this.pathOf(key), { force: true });
      this.entries.delete(key);
      total -= e.size_bytes;
      this.log.info({ sha256: key, source: e.source, size_bytes: e.size_bytes }, 'evicted a model file no shard uses (--model-cache-max)');
    }
    if (total > this.maxBytes)
      this.log.warn({ total_bytes: total, max_bytes: this.maxBytes }, 'the model cache is over --model-cache-max: the files left are in use');
    this.save();
  }

  /** Every cached file, for `NodeReport.files`. */
  list(inUse: ReadonlySet<string>): CachedFile[] {
    return [...this.entries.entries()].map(([sha256, e]) => ({ sha256, ...e, in_use: inUse.has(sha256) }));
  }

  private indexFile(): string {
    return path.join(this.dir, 'index.json');
  }

  /** The index, less entries whose file is gone; a broken index is started afresh (the files are fetched again). */
  private load(): Map<string, Entry> {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(this.indexFile(), 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.warn({ file: this.indexFile(), err: (err as Error).message }, 'ignoring an unreadable model cache index');
      return new Map();
    }
    const out = new Map<string, Entry>();
    // Valid JSON need not be an object: `null` would throw here and stop the agent.
    const files = typeof raw === 'object' && raw !== null ? (raw as { files?: unknown }).files : undefined;
    if (typeof files !== 'object' || files === null) return out;
    for (const [key, v] of Object.entries(files as Record<string, unknown>)) {
      const e = v as Partial<Entry>;
      // The entries go into every report as they are: one the server's schema refuses
      // (a fraction, a negative size, a time no Date holds) would get every heartbeat refused.
      if (!HEX64.test(key) || typeof e.source !== 'string' || !e.source || !isCount(e.size_bytes) || !isCount(e.last_used_ms) || e.last_used_ms > MAX_DATE_MS)
        continue;
      if (!fs.existsSync(this.pathOf(key))) continue;
      out.set(key, { source: e.source, size_bytes: e.size_bytes, last_used_ms: e.last_used_ms });
    }
    return out;
  }

  /**
   * Writes the index; a failure (a full disk) is logged, not thrown. The index only
   * records sources and last uses: a verified file that is here must still reach its
   * engine, and the next write that succeeds catches up. Had it thrown, every start of
   * a cached shard would fail with ENOSPC and be retried for as long as the disk is full.
   */
  private save(): void {
    try {
      writePrivateFile(this.indexFile(), JSON.stringify({ files: Object.fromEntries(this.entries) }, null, 1) + '\n');
    } catch (err) {
      this.log.warn({ file: this.indexFile(), err: (err as Error).message }, 'cannot write the model cache index; its files are still used');
    }
  }
}
