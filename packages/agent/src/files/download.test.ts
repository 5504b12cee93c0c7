import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import got from 'got';
import { ChecksumMismatch, download, FetchRefused, parseContentRange, type DownloadRequest, type Progress } from './download.js';
import { fileServer, type FileServerOptions } from './test-file-server.js';

const body = randomBytes(256 * 1024);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-dl-'));
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
  fs.rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** A server with these quirks, and a request against it with overrides. */
async function setup(o: FileServerOptions = {}, over: Partial<DownloadRequest> = {}) {
  const srv = await fileServer(body, o);
  closers.push(srv.close);
  const progress: Progress[] = [];
  const req: DownloadRequest = {
    url: `${srv.url}/model.gguf`,
    sha256: srv.sha256,
    partial: path.join(dir, `partial-${++n}`),
    client: got,
    retryDelayMs: 10,
    onProgress: (p) => progress.push(p),
    ...over,
  };
  return { srv, req, progress };
}

describe('download', () => {
  it('streams the file into the partial and verifies it', async () => {
    const { req, progress } = await setup();
    await download(req);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
    expect(progress.at(-1)).toEqual({ done: body.length, total: body.length });
  });

  it('reports progress as a throttled transfer comes', async () => {
    const { req, progress } = await setup({ chunkBytes: 32 * 1024, pauseMs: 5 });
    await download(req);
    const dones = progress.map((p) => p.done);
    expect(new Set(dones).size).toBeGreaterThan(4);
    expect(dones).toEqual([...dones].sort((a, b) => a - b));
  });

  it('resumes with a Range request after the server drops the connection half-way', async () => {
    const half = body.length / 2;
    const { srv, req } = await setup({ chunkBytes: 16 * 1024, dropAfter: half });
    await download(req);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
    expect(srv.seen).toHaveLength(2);
    expect(srv.seen[0]?.range).toBeUndefined();
    // From the last byte on disk: all that arrived, less what the client still buffered when the connection dropped.
    const from = Number(/^bytes=(\d+)-$/.exec(srv.seen[1]?.range ?? '')?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(half);
  });

  it('resumes a partial left by an earlier agent', async () => {
    const { srv, req } = await setup();
    fs.writeFileSync(req.partial, body.subarray(0, 1000));
    await download(req);
    expect(srv.seen.map((s) => s.range)).toEqual(['bytes=1000-']);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
  });

  it('finishes a partial that was already whole (416 with the same total)', async () => {
    const { srv, req } = await setup();
    fs.writeFileSync(req.partial, body);
    await download(req);
    expect(srv.seen).toHaveLength(1);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
  });

  it('starts over when the server ignores Range (200 with the whole file)', async () => {
    const { req } = await setup({ ignoreRange: true, dropAfter: 5000 });
    await download(req);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
  });

  it('fetches a file sent without Content-Length; progress has no total', async () => {
    const { req, progress } = await setup({ noLength: true, chunkBytes: 64 * 1024 });
    await download(req);
    expect(fs.readFileSync(req.partial).equals(body)).toBe(true);
    expect(progress.every((p) => p.total === undefined)).toBe(true);
  });

  it('a wrong checksum deletes the file and names both digests', async () => {
    const wrong = 'ab'.repeat(32);
    const { srv, req } = await setup({}, { sha256: wrong });
    const err = await download(req).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChecksumMismatch);
    expect((err as Error).message).toContain(wrong);
    expect((err as Error).message).toContain(srv.sha256);
    expect(fs.existsSync(req.partial)).toBe(false);
  });

  it('a 404 is refused at once, not retried', async () => {
    const { srv, req } = await setup({ status: 404 });
    await expect(download(req)).rejects.toThrow(FetchRefused);
    await expect(download(req)).rejects.toThrow(/answered 404/);
    expect(srv.seen).toHaveLength(2);
  });

  it('gives up after tries that add nothing, saying why', async () => {
    const { srv, req } = await setup({ status: 503 }, { attempts: 3 });
    await expect(download(req)).rejects.toThrow(/3 tries without progress/);
    expect(srv.seen).toHaveLength(3);
  });

  it('refuses a file larger than the cache may hold', async () => {
    const { req } = await setup({}, { maxBytes: 1000 });
    await expect(download(req)).rejects.toThrow(/: it is 262144 bytes, more than fit: --model-cache-max 1000$/);
    const { req: unknownLength } = await setup({ noLength: true }, { maxBytes: 1000 });
    await expect(download(unknownLength)).rejects.toThrow(/: it went on past 1000 bytes, more than fit: --model-cache-max 1000$/);
    // Nothing is kept of a file that cannot fit: its partial would hold the disk.
    expect(fs.existsSync(unknownLength.partial)).toBe(false);
  });
});

describe('parseContentRange', () => {
  it.each([
    ['bytes 10-99/100', { start: 10, total: 100 }],
    ['bytes */100', { total: 100 }],
    ['bytes 0-9/*', { start: 0 }],
    ['items 0-9/10', undefined],
    [undefined, undefined],
  ])('%s', (v, want) => expect(parseContentRange(v)).toEqual(want));
});
