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
 * The share of the cache's filesystem the cache may fill when `--model-cache-max` is not
 * given: an endless or huge source stops here rather than filling the disk, and the
 * fifth left over is room for the logs, the state and whatever else lives there.
 */
export const DEFAULT_CACHE_SHARE = 0.8;

/** The filesystem holding `dir`: its size and the bytes free to an unprivileged writer. */
export function diskOf(dir: string): { totalBytes: number; freeBytes: number } {
  const s = fs.statfsSync(dir);
  return { totalBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize };
}

/** Where a fetch's bytes may go: its bound, and why (for the error that names it). */
export interface Room {
  bytes: number;
  why: string;
}

/**
 * The agent's model cache (`--model-cache`): verified files stored by content,
 * `<dir>/sha256/<hex>`, so two sources of the same bytes are one file and a file's name
 * says what it must hash to. `<dir>/index.json` keeps each file's source and last use for
 * `NodeReport.files` and eviction. Only verified files are ever in `sha256/`: a transfer
 * lands in `<dir>/partial/<hex>` first and is renamed once its digest matches.
 */
export class ModelCache {
  private entries = new Map<string, Entry>();
  /** The bound in bytes: `--model-cache-max`, else {@link DEFAULT_CACHE_SHARE} of the disk. */
  readonly maxBytes: number;
  /** What sets the bound, for messages. */
  readonly bound: string;

  constructor(
    readonly dir: string,
    /** `--model-cache-max` in bytes; undefined: {@link DEFAULT_CACHE_SHARE} of the filesystem. */
    maxBytes: number | undefined,
    private readonly log: Logger,
    /** The filesystem's figures (tests give their own). */
    private readonly disk: (dir: string) => { totalBytes: number; freeBytes: number } = diskOf,
  ) {
    // Engines run as another user (`--engine-user`) and the service's umask is 0077:
    // chmod, which the umask does not touch, lets them reach and read the files.
    for (const d of [dir, path.join(dir, 'sha256')]) {
      fs.mkdirSync(d, { recursive: true });
      fs.chmodSync(d, 0o755);
    }
    fs.mkdirSync(path.join(dir, 'partial'), { recursive: true });
    if (maxBytes !== undefined) {
      this.maxBytes = maxBytes;
      this.bound = `--model-cache-max ${maxBytes}`;
    } else {
      const total = this.disk(dir).totalBytes;
      this.maxBytes = Math.floor(total * DEFAULT_CACHE_SHARE);
      this.bound = `${DEFAULT_CACHE_SHARE * 100}% of the ${total}-byte disk, the default without --model-cache-max`;
    }
    this.entries = this.load();
  }

  /**
   * The most bytes a transfer of `sha256` may write, its partial file included: what the
   * bound leaves once the files in use and the other transfers' partial files are
   * counted (idle files are evicted to make room when it is added), and no more than the
   * disk has free. The partials of other files whose transfer is no longer under way
   * (kept to resume) are deleted first: they would hold room the new transfer may need.
   * @param fetching digests being fetched now, besides this one
   */
  room(sha256: string, inUse: ReadonlySet<string>, fetching: ReadonlySet<string>): Room {
    const key = sha256.toLowerCase();
    let own = 0;
    let others = 0;
    for (const p of this.partials()) {
      if (p.key === key) own = p.size;
      else if (fetching.has(p.key)) others += p.size;
      else {
        fs.rmSync(this.partialOf(p.key), { force: true });
        this.log.info({ sha256: p.key, size_bytes: p.size }, 'deleted the partial file of a transfer no longer under way, to make room');
      }
    }
    let pinned = 0;
    let idle = 0;
    for (const [k, e] of this.entries) {
      if (inUse.has(k)) pinned += e.size_bytes;
      else idle += e.size_bytes;
    }
    const byBound = Math.max(0, this.maxBytes - pinned - others);
    // On disk: what is free, plus what this transfer's partial and eviction would give back.
    const byDisk = Math.max(0, this.disk(this.dir).freeBytes + own + idle);
    return byDisk < byBound
      ? { bytes: byDisk, why: `the ${byDisk} bytes the disk under the model cache has room for` }
      : { bytes: byBound, why: `the ${byBound} bytes left in the model cache (${this.bound}; files in use and other transfers take the rest)` };
  }

  /** The partial files on disk, with their sizes. */
  private partials(): { key: string; size: number; mtimeMs: number }[] {
    const out: { key: string; size: number; mtimeMs: number }[] = [];
    let names: string[];
    try {
      names = fs.readdirSync(path.join(this.dir, 'partial'));
    } catch {
      return out;
    }
    for (const key of names) {
      if (!HEX64.test(key)) continue;
      try {
        const st = fs.statSync(this.partialOf(key));
        out.push({ key, size: st.size, mtimeMs: st.mtimeMs });
      } catch {
        // Gone meanwhile.
      }
    }
    return out;
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
    let total = incoming + [...this.entries.values()].reduce((n, e) => n + e.size_bytes, 0);
    const idle = [...this.entries.entries()].filter(([k]) => !inUse.has(k) && k !== keep).sort((a, b) => a[1].last_used_ms - b[1].last_used_ms);
    for (const [key, e] of idle) {
      if (total <= this.maxBytes) break;
      fs.rmSync(this.pathOf(key), { force: true });
      this.entries.delete(key);
      total -= e.size_bytes;
      this.log.info({ sha256: key, source: e.source, size_bytes: e.size_bytes }, `evicted a model file no shard uses (${this.bound})`);
    }
    if (total > this.maxBytes)
      this.log.warn({ total_bytes: total, max_bytes: this.maxBytes }, `the model cache is over its bound (${this.bound}): the files left are in use`);
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
