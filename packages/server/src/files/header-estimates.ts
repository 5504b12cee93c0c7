import { estimateForHeader, estimateForSource, readGgufHeaderAt } from '@llmgw/gguf';
import type { Logger } from 'pino';
import { EnvHttpProxyAgent, fetch, type Dispatcher, type Response } from 'undici';
import { fileInside } from './inside.js';
import { llmgwName } from './sources.js';

/** A GGUF source agents fetch, whose memory need the server reads from its header. */
export interface FetchedGguf {
  source: string;
  sha256: string;
}

/** A header is metadata; anything larger is not a model this reader should walk. */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;
/** A header that could not be read is tried again after this long (a file server was down). */
const RETRY_AFTER_MS = 60_000;

/**
 * The first bytes of an http(s) URL, read with `Range` requests: 206 with
 * `Content-Range: bytes 0-N/SIZE` gives the size; a server that ignores Range (200) is
 * read only as far as needed, its size from `Content-Length`. Returns a reader for
 * `readGgufHeaderAt`.
 */
export async function rangeReader(url: string, dispatcher?: Dispatcher): Promise<{ size: number; read: (n: number) => Promise<Buffer> }> {
  const first = 1 << 20;
  const get = async (from: number, to: number): Promise<{ size: number; bytes: Buffer }> => {
    const res = await fetch(url, {
      headers: { range: `bytes=${from}-${to}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      ...(dispatcher ? { dispatcher } : {}),
    });
    const want = to - from + 1;
    if (res.status === 206) {
      const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
      if (!m || Number(m[1]) !== from)
        throw new Error(`answered a Range request with Content-Range "${res.headers.get('content-range') ?? ''}", not bytes ${from}-…/SIZE`);
      return { size: Number(m[3]), bytes: await readAtMost(res, want) };
    }
    if (res.status === 200 && from === 0) {
      const size = Number(res.headers.get('content-length'));
      if (!Number.isSafeInteger(size) || size <= 0) throw new Error('takes no Range requests and sends no Content-Length: its size is unknown');
      // Read what is needed and hang up: the rest is the weights.
      return { size, bytes: await readAtMost(res, want) };
    }
    await res.body?.cancel();
    throw new Error(`answered HTTP ${res.status}${res.status === 416 ? ' (an empty file?)' : ''}`);
  };
  const head = await get(0, first - 1);
  let have = head.bytes;
  return {
    size: head.size,
    read: async (n) => {
      if (n > MAX_HEADER_BYTES) throw new Error(`its GGUF header runs past ${MAX_HEADER_BYTES / 1024 / 1024} MiB: not a model file`);
      if (n > have.length) have = Buffer.concat([have, (await get(have.length, n - 1)).bytes]);
      return have.subarray(0, n);
    },
  };
}

/**
 * The first `want` bytes of a body, then hang up. A 206 is read this way too: a file
 * server that sends more than the range asked for (or never ends) must not fill the
 * server's memory, nor hold the reading until the timeout.
 */
async function readAtMost(res: Response, want: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let have = 0;
  for await (const chunk of res.body ?? []) {
    chunks.push(Buffer.from(chunk as Uint8Array));
    have += (chunk as Uint8Array).length;
    if (have >= want) break;
  }
  return Buffer.concat(chunks).subarray(0, want);
}

interface Known {
  mb?: number;
  failedAtMs?: number;
}

/**
 * Memory estimates of GGUF sources agents fetch, read by the server before placement so
 * such a profile needs no `min_memory_gb`: an http(s):// URL's header with Range
 * requests (through the standard proxy variables, as undici's EnvHttpProxyAgent reads
 * them), an llmgw:// file's from `--models-dir`. Each source is read once per digest;
 * a failure is logged with what to do, the profile is placed as written meanwhile, and
 * it is tried again a minute later. `onChange` is called when a reading ends.
 */
export class HeaderEstimates {
  private readonly known = new Map<string, Known>();
  private readonly running = new Set<string>();
  private readonly dispatcher = new EnvHttpProxyAgent();

  constructor(
    private readonly opts: {
      modelsDir?: string;
      log: Logger;
      onChange: () => void;
      now?: () => number;
    },
  ) {}

  /** What placement may use now: estimates in MiB by source, and the sources still being read. */
  lookup(wanted: readonly FetchedGguf[]): { estimates: Map<string, number>; pending: Set<string> } {
    const estimates = new Map<string, number>();
    const pending = new Set<string>();
    const now = (this.opts.now ?? Date.now)();
    for (const w of wanted) {
      const key = `${w.sha256} ${w.source}`;
      const k = this.known.get(key);
      if (k?.mb !== undefined) estimates.set(w.source, k.mb);
      if (this.running.has(key)) pending.add(w.source);
      else if (!k || (k.failedAtMs !== undefined && now - k.failedAtMs >= RETRY_AFTER_MS)) {
        // Only the first reading holds the model back; a retry does not.
        if (!k) pending.add(w.source);
        this.start(key, w.source);
      }
    }
    return { estimates, pending };
  }

  private start(key: string, source: string): void {
    this.running.add(key);
    void this.estimate(source)
      .then(
        (mb) => {
          this.known.set(key, { mb });
          this.opts.log.info({ source, memory_mb: mb }, 'read the GGUF header of a fetched source for its memory estimate');
        },
        (err: unknown) => {
          this.known.set(key, { failedAtMs: (this.opts.now ?? Date.now)() });
          this.opts.log.warn(
            { source, err: (err as Error).message },
            `cannot read the GGUF header of ${source} to estimate its memory (${(err as Error).message}): placing it without a memory need; set min_memory_gb on the profile, or make the file readable by the server`,
          );
        },
      )
      .finally(() => {
        this.running.delete(key);
        this.opts.onChange();
      });
  }

  private async estimate(source: string): Promise<number> {
    const name = llmgwName(source);
    if (name !== undefined) {
      if (this.opts.modelsDir === undefined) throw new Error('no --models-dir');
      // The same rule as serving: a link leading out of the directory is no model file.
      const file = await fileInside(this.opts.modelsDir, name);
      const e = file === undefined ? undefined : await estimateForSource(file);
      if (!e) throw new Error(`${name} in --models-dir is missing or not a complete GGUF`);
      return Math.ceil(e.totalMb);
    }
    const { size, read } = await rangeReader(source, this.dispatcher);
    return Math.ceil(estimateForHeader(await readGgufHeaderAt(size, read)).totalMb);
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}
