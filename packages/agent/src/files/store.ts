import fs from 'node:fs';
import got, { type Got } from 'got';
import type { Logger } from 'pino';
import { redactUrl, redactUrls, type CachedFile, type DownloadProgress, type ShardAssignment } from '@llmgw/shared';
import type { AgentAuth } from '../credential.js';
import type { ModelCache } from './cache.js';
import { ChecksumMismatch, FileTooLarge, download, type Progress } from './download.js';
import { headersFor, type SourceHeaders } from './headers.js';
import { proxyAgents, proxyFor } from './proxy.js';
import { ServerPool } from '../servers.js';

/** The file an assignment asks for (`ShardAssignment.file`). */
export type WantedFile = NonNullable<ShardAssignment['file']>;

/** What the supervisor needs from the model files: the path to give the engine, and progress meanwhile. */
export interface FileSource {
  /**
   * The verified file's path, fetched first when the cache lacks it. `signal` says the
   * shard no longer wants it: the transfer stops once no shard waits for it (the partial
   * file stays, for a later resume).
   */
  ensure(file: WantedFile, signal?: AbortSignal, onFetched?: (f: Fetched) => void): Promise<string>;
  /** How far a fetch of this digest got; undefined when none is under way. */
  progress(sha256: string): DownloadProgress | undefined;
}

/** A file that was fetched, not found in the cache: its size, and how long the transfer and check took (`ShardStatus.fetched`). */
export interface Fetched {
  bytes: number;
  ms: number;
}

/** A source the agent cannot fetch from at all (not http(s):// or llmgw://). */
export class UnusableSource extends Error {}

/** A fetch failure that retrying cannot fix: the shard fails at once instead of being restarted. */
export function isUnrunnable(err: unknown): boolean {
  return err instanceof ChecksumMismatch || err instanceof UnusableSource || err instanceof FileTooLarge;
}

export interface ModelFilesOptions {
  cache: ModelCache;
  /** The agent's server URL, or the pool the agent shares (`llmgw://NAME` is `<server>/agent/v1/files/NAME`, from any instance). */
  server: string | ServerPool;
  /** The client of the agent's other server calls (the pinned CA). */
  serverClient: Got;
  /** The node credential, sent with `llmgw://` requests. */
  auth?: AgentAuth;
  headers?: SourceHeaders;
  /** The digests shards use now: never evicted, `in_use` in the report. */
  inUse: () => ReadonlySet<string>;
  log: Logger;
  /** For tests: pauses between retries of an interrupted transfer. */
  retryDelayMs?: number;
}

/** Speed is measured over this window. */
const RATE_WINDOW_MS = 5_000;

interface Fetching {
  done: Promise<string>;
  /** Shards waiting for it; the transfer is aborted when the last one leaves. */
  waiters: number;
  abort: AbortController;
  progress?: Progress;
  samples: { t: number; done: number }[];
  /** Set once the file is in the cache. */
  fetched?: Fetched;
}

/**
 * The agent's model files: finds a verified file in the cache or fetches it (one transfer
 * per digest, however many shards wait for it), with progress for the heartbeat.
 */
export class ModelFiles implements FileSource {
  private readonly fetching = new Map<string, Fetching>();
  private readonly servers: ServerPool;

  constructor(private readonly o: ModelFilesOptions) {
    this.servers = ServerPool.of(o.server, o.log);
  }

  /** `onFetched` is called before the path is given when the file was fetched for this call (not found in the cache). */
  ensure(file: WantedFile, signal?: AbortSignal, onFetched?: (f: Fetched) => void): Promise<string> {
    // The digest names a path in the cache: nothing but hex may reach it.
    if (!/^[0-9a-fA-F]{64}$/.test(file.sha256))
      return Promise.reject(new UnusableSource(`cannot fetch ${file.url}: sha256 "${file.sha256}" is not 64 hex digits`));
    const key = file.sha256.toLowerCase();
    const cached = this.o.cache.use(key);
    if (cached) return Promise.resolve(cached);
    let f = this.fetching.get(key);
    if (!f) {
      const started: Fetching = { samples: [], waiters: 0, abort: new AbortController(), done: Promise.resolve('') };
      started.done = this.fetch(file, key, started).finally(() => this.fetching.delete(key));
      this.fetching.set(key, started);
      f = started;
    }
    f.waiters++;
    const fetching = f;
    const done = signal ? this.waitFor(f, signal) : f.done;
    if (!onFetched) return done;
    return done.then((path) => {
      if (fetching.fetched) onFetched(fetching.fetched);
      return path;
    });
  }

  /** The fetch's outcome for one shard, which may stop waiting (and so end the transfer when it was the last). */
  private waitFor(f: Fetching, signal: AbortSignal): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const leave = () => {
        reject(new Error('no shard wants the file any more'));
        if (--f.waiters === 0) f.abort.abort();
      };
      if (signal.aborted) return leave();
      signal.addEventListener('abort', leave, { once: true });
      f.done.then(resolve, reject).finally(() => signal.removeEventListener('abort', leave));
    });
  }

  progress(sha256: string): DownloadProgress | undefined {
    const f = this.fetching.get(sha256.toLowerCase());
    if (!f?.progress) return undefined;
    const first = f.samples[0];
    const last = f.samples[f.samples.length - 1];
    const span = first && last ? last.t - first.t : 0;
    const rate = first && last && span > 0 ? Math.round(((last.done - first.done) * 1000) / span) : 0;
    return { done_bytes: f.progress.done, ...(f.progress.total !== undefined ? { total_bytes: f.progress.total } : {}), bytes_per_s: Math.max(0, rate) };
  }

  /** Applies `--model-cache-max` now (at start: the bound may have shrunk since the last run). */
  evict(): void {
    this.o.cache.evict(this.o.inUse());
  }

  /** The cache's files for `NodeReport.files`. */
  list(): CachedFile[] {
    return this.o.cache.list(this.o.inUse());
  }

  private async fetch(file: WantedFile, key: string, f: Fetching): Promise<string> {
    const { url, client, headers, agent, moveOn } = await this.request(file.url);
    const started = Date.now();
    const inUse = new Set([...this.o.inUse()].map((s) => s.toLowerCase()));
    const room = this.o.cache.room(key, inUse, new Set([...this.fetching.keys()].filter((k) => k !== key)));
    this.o.log.info({ url: redactUrl(file.url), sha256: key, room_bytes: room.bytes }, 'fetching a model file');
    try {
      await download({
        url,
        sha256: key,
        partial: this.o.cache.partialOf(key),
        client,
        headers,
        ...(agent ? { agent } : {}),
        maxBytes: room.bytes,
        maxWhy: room.why,
        ...(file.size_bytes !== undefined ? { sizeBytes: file.size_bytes } : {}),
        ...(this.o.retryDelayMs !== undefined ? { retryDelayMs: this.o.retryDelayMs } : {}),
        ...(moveOn ? { moveOn } : {}),
        signal: f.abort.signal,
        onProgress: (p) => {
          const t = Date.now();
          f.progress = p;
          f.samples.push({ t, done: p.done });
          while (f.samples.length > 2 && (f.samples[0]?.t ?? t) < t - RATE_WINDOW_MS) f.samples.shift();
        },
      });
    } catch (err) {
      if (f.abort.signal.aborted)
        this.o.log.info({ url: redactUrl(file.url), sha256: key, bytes: f.progress?.done }, 'stopped fetching a model file no shard wants any more');
      else this.o.log.error({ url: redactUrl(file.url), sha256: key }, redactUrls((err as Error).message));
      throw err;
    }
    const path = this.o.cache.add(key, file.url, new Set([...this.o.inUse()].map((s) => s.toLowerCase())));
    f.fetched = { bytes: fs.statSync(path).size, ms: Date.now() - started };
    this.o.log.info({ url: redactUrl(file.url), sha256: key, bytes: f.fetched.bytes, took_ms: f.fetched.ms }, 'model file fetched and verified');
    return path;
  }

  /** Where to send the request and how: `llmgw://` to the server with the node credential, else through the proxy settings. */
  private async request(source: string) {
    if (source.startsWith('llmgw://')) {
      const name = source.slice('llmgw://'.length);
      const authorization = this.o.auth ? await this.o.auth.header() : undefined;
      const file = `/agent/v1/files/${encodeURIComponent(name)}`;
      const servers = this.servers;
      const headers: Record<string, string> = authorization ? { authorization } : {};
      return {
        url: `${servers.current}${file}`,
        client: this.o.serverClient,
        headers,
        agent: undefined,
        // Every instance serves the same files: a transfer cut by its instance resumes on the next.
        moveOn: (url: string, err: unknown) => {
          const to = servers.after(url.slice(0, -file.length), err);
          return to === undefined ? undefined : `${to}${file}`;
        },
      };
    }
    let parsed: URL;
    try {
      parsed = new URL(source);
    } catch {
      throw new UnusableSource(`cannot fetch "${source}": not a URL (want http(s)://… or llmgw://NAME)`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new UnusableSource(`cannot fetch "${source}": want an http(s):// or llmgw:// source`);
    const proxy = proxyFor(source);
    return {
      url: source,
      client: got,
      headers: headersFor(this.o.headers ?? new Map<string, Record<string, string>>(), parsed),
      agent: proxy ? proxyAgents(proxy) : undefined,
      moveOn: undefined,
    };
  }
}
