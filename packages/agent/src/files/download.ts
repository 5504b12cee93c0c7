import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { HTTPError, type Agents, type Got, type Response } from 'got';
import { checksumMismatchText, redactUrl, redactUrls } from '@llmgw/shared';
import { RedirectRefused, redirectGuard, type Lookup } from './redirects.js';

/** How far a transfer got; `total` when the file server said (Content-Length, Content-Range). */
export interface Progress {
  done: number;
  total?: number;
}

export interface DownloadRequest {
  url: string;
  /** The expected SHA-256 (hex). */
  sha256: string;
  /** Written to until verified; when it exists, the transfer resumes after its last byte. */
  partial: string;
  client: Got;
  headers?: Record<string, string>;
  /** A proxy agent (`proxy.ts`); none: straight to the file server. */
  agent?: Agents;
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
  /** Tries in a row that add no byte before giving up. Default 5. */
  attempts?: number;
  /** First pause between tries; doubles. Default 500 ms. */
  retryDelayMs?: number;
  /** A file larger than this is refused (a server that never ends would fill the disk); the partial file counts. */
  maxBytes?: number;
  /** What sets `maxBytes`, for the error (default: `--model-cache-max N`). */
  maxWhy?: string;
  /** The size the catalog gives the file: a declared length that differs is refused, and no more is read. */
  sizeBytes?: number;
  /**
   * Where to ask next after a try at `url` failed with `err`, when another address serves
   * the same file (an `llmgw://` file from another server instance): that try follows at
   * once (the first time in a row), resuming where the file ends. Undefined: the same URL,
   * after the pause.
   */
  moveOn?: (url: string, err: unknown) => string | undefined;
  /** How a redirect's host name is resolved for `redirectGuard`; default the system's. */
  lookup?: Lookup;
}

/** The bytes do not hash to what the catalog says: the file was deleted, and retrying will fetch the same bytes. */
export class ChecksumMismatch extends Error {
  constructor(
    readonly url: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(checksumMismatchText(url, expected, actual));
  }
}

/** The file server refused the file (4xx other than a stale Range): no point trying again soon. */
export class FetchRefused extends Error {}

/**
 * The file does not fit where it must go (the model cache's room, the catalog's size):
 * its partial file is deleted, and retrying would fill the disk again for nothing.
 */
export class FileTooLarge extends FetchRefused {}

/**
 * Fetches `url` into `partial` and verifies its SHA-256, resuming with an HTTP Range
 * request after an interrupted transfer (within one call, and across agent restarts, since
 * the partial file stays). A resumed answer counts only as a `206` whose Content-Range
 * starts where the file ends; anything else (a `200`, another start) starts over, so a
 * server without Range support still works. On a mismatch the partial is deleted and
 * `ChecksumMismatch` names both digests.
 */
export async function download(r: DownloadRequest): Promise<void> {
  const attempts = r.attempts ?? 5;
  let idle = 0;
  let url = r.url;
  for (;;) {
    const before = sizeOf(r.partial);
    try {
      if (await transfer({ ...r, url })) break;
    } catch (err) {
      // A file that cannot fit leaves nothing behind: its partial would hold the disk.
      if (err instanceof FileTooLarge) fs.rmSync(r.partial, { force: true });
      if (err instanceof FetchRefused || r.signal?.aborted) throw err;
      if (sizeOf(r.partial) > before) idle = 0;
      if (++idle >= attempts)
        throw new Error(`cannot fetch ${redactUrl(url)}: ${redactUrls((err as Error).message)} (${attempts} tries without progress)`, { cause: err });
      const next = r.moveOn?.(url, err);
      if (next !== undefined) url = next;
      // The first try elsewhere follows at once; when every address keeps failing, the pauses hold.
      if (next === undefined || idle > 1) await new Promise((res) => setTimeout(res, (r.retryDelayMs ?? 500) * 2 ** (idle - 1)));
    }
  }
  const actual = await sha256Of(r.partial);
  if (actual !== r.sha256.toLowerCase()) {
    fs.rmSync(r.partial, { force: true });
    throw new ChecksumMismatch(r.url, r.sha256.toLowerCase(), actual);
  }
}

/** One request; true when the partial now holds the whole file. Throws on an interruption. */
async function transfer(r: DownloadRequest): Promise<boolean> {
  let have = sizeOf(r.partial);
  const stream = r.client.stream(r.url, {
    headers: { ...r.headers, ...(have > 0 ? { range: `bytes=${have}-` } : {}) },
    ...(r.agent ? { agent: r.agent } : {}),
    retry: { limit: 0 },
    timeout: { connect: 10_000, response: 30_000, read: 60_000 },
    throwHttpErrors: false,
    decompress: false,
    ...(r.signal ? { signal: r.signal } : {}),
    // got drops only authorization and cookie on a redirect to another origin: the
    // headers given for this URL's host (--source-header: X-Api-Key, Private-Token, …)
    // would go on to a CDN or wherever the file server points. They are for its host alone.
    hooks: { beforeRedirect: [(o) => dropHeadersOffHost(o, new URL(r.url).host, r.headers), redirectGuard(r.url, r.lookup)] },
  });
  const res = await new Promise<Response>((resolve, reject) => {
    stream.once('response', resolve);
    // got wraps what a hook throws; a refused redirect is final, not a try to repeat.
    stream.once('error', (err: Error) => reject(err.cause instanceof RedirectRefused ? new FetchRefused(err.cause.message) : err));
  });
  const range = parseContentRange(res.headers['content-range']);
  if (res.statusCode === 416 && have > 0 && range?.total === have) {
    stream.destroy();
    return true; // the partial was already whole (an agent stopped between the last byte and the check)
  }
  if (res.statusCode === 416 || (res.statusCode === 206 && range?.start !== have)) {
    stream.destroy();
    fs.rmSync(r.partial, { force: true });
    throw new Error(`the file server answered ${res.statusCode} to a resume at byte ${have}; starting over`);
  }
  if (res.statusCode >= 400) {
    stream.destroy();
    const why = `${res.statusCode} ${res.statusMessage ?? ''}`.trim();
    if (res.statusCode < 500 && res.statusCode !== 408 && res.statusCode !== 429)
      throw new FetchRefused(`cannot fetch ${r.url}: the file server answered ${why}`);
    throw new HTTPError(res);
  }
  if (res.statusCode !== 206) have = 0; // a whole answer: whatever was there is replaced
  const length = Number(res.headers['content-length']);
  const total = range?.total ?? (Number.isFinite(length) && res.headers['content-length'] !== undefined ? have + length : undefined);
  const why = r.maxWhy ?? `--model-cache-max ${r.maxBytes}`;
  if (r.maxBytes !== undefined && total !== undefined && total > r.maxBytes) {
    stream.destroy();
    throw new FileTooLarge(`cannot fetch ${redactUrl(r.url)}: it is ${total} bytes, more than fit: ${why}`);
  }
  if (r.sizeBytes !== undefined && total !== undefined && total !== r.sizeBytes) {
    stream.destroy();
    throw new FileTooLarge(`cannot fetch ${redactUrl(r.url)}: the file server says it is ${total} bytes, the catalog ${r.sizeBytes}`);
  }
  // The most this transfer may hold: what the server declared, the catalog's size, the room.
  const most = Math.min(total ?? Infinity, r.sizeBytes ?? Infinity, r.maxBytes ?? Infinity);
  let done = have;
  r.onProgress?.({ done, ...(total !== undefined ? { total } : {}) });
  // Each chunk is on disk before the next is read, so an interrupted transfer keeps every
  // byte it received and the resume starts right after it (a write stream torn down by
  // the error would drop what it still buffered).
  const out = await fs.promises.open(r.partial, have > 0 ? 'a' : 'w', 0o644);
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (done + chunk.length > most) {
        stream.destroy();
        throw new FileTooLarge(
          r.maxBytes !== undefined && most === r.maxBytes
            ? `cannot fetch ${redactUrl(r.url)}: it went on past ${r.maxBytes} bytes, more than fit: ${why}`
            : `cannot fetch ${redactUrl(r.url)}: it went on past the ${most} bytes ${most === total ? 'the file server declared' : 'the catalog gives it'}`,
        );
      }
      await out.write(chunk);
      done += chunk.length;
      r.onProgress?.({ done, ...(total !== undefined ? { total } : {}) });
    }
  } finally {
    await out.close();
  }
  if (total !== undefined && done < total) throw new Error(`the transfer ended at byte ${done} of ${total}`);
  return true;
}

/** Removes `given` from a redirected request's headers once it leaves `host`. */
function dropHeadersOffHost(
  o: { url?: string | URL | undefined; headers: Record<string, unknown> },
  host: string,
  given: Record<string, string> | undefined,
): void {
  const to = o.url instanceof URL ? o.url : new URL(String(o.url));
  if (to.host === host || !given) return;
  for (const name of Object.keys(given)) delete o.headers[name.toLowerCase()];
}

/** A Content-Range value, `bytes START-END/TOTAL` or `bytes` star-slash-TOTAL (TOTAL may be a star too). */
export function parseContentRange(v: string | undefined): { start?: number; total?: number } | undefined {
  const m = v === undefined ? null : /^bytes\s+(?:(\d+)-\d+|\*)\/(\d+|\*)$/i.exec(v.trim());
  if (!m) return undefined;
  return { ...(m[1] !== undefined ? { start: Number(m[1]) } : {}), ...(m[2] !== '*' && m[2] !== undefined ? { total: Number(m[2]) } : {}) };
}

function sizeOf(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

/** The file's SHA-256 (hex), read in a stream: model files are gigabytes. */
export async function sha256Of(file: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(fs.createReadStream(file), h);
  return h.digest('hex');
}
