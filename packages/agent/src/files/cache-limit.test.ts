import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import got from 'got';
import { pino } from 'pino';
import type { ShardAssignment } from '@llmgw/shared';
import { DEFAULT_CACHE_SHARE, ModelCache } from './cache.js';
import { FileTooLarge } from './download.js';
import { isUnrunnable, ModelFiles } from './store.js';
import { fileServer } from './test-file-server.js';
import { Supervisor } from '../supervisor/index.js';
import { waitFor } from '../testing.js';

// Issue 28: an endless or huge source filled the node's disk and kept it full. The model
// cache has a bound by default, a transfer may write only the room left under it (other
// transfers' partial files counted), and a file that cannot fit fails its replica.

const log = pino({ level: 'silent' });
const dirs: string[] = [];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-limit-'));
  dirs.push(d);
  return d;
}

const SHA = 'ab'.repeat(32);
const MiB = 1024 * 1024;

/** A file server whose answer never ends (chunked, 64 KiB writes for as long as the client reads). */
async function endless(): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const chunk = Buffer.alloc(64 * 1024, 7);
  const srv = http.createServer((_req, res) => {
    requests++;
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const more = () => {
      while (!res.destroyed && res.write(chunk));
      if (!res.destroyed) res.once('drain', more);
    };
    more();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  closers.push(() => {
    srv.closeAllConnections();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/m.gguf`, requests: () => requests };
}

function modelFiles(cache: ModelCache, inUse = new Set<string>()) {
  return new ModelFiles({ cache, server: 'http://127.0.0.1:1', serverClient: got, inUse: () => inUse, log, retryDelayMs: 10 });
}

/** A disk of `totalBytes` with plenty free: the default bound is its share of it. */
const bigDisk = (totalBytes: number) => () => ({ totalBytes, freeBytes: 2 ** 40 });

describe('the model cache bound', () => {
  it('stops an endless source at --model-cache-max with a clear error, deletes its partial and does not retry', async () => {
    const src = await endless();
    const cache = new ModelCache(tmp(), MiB, log);
    const err = await modelFiles(cache)
      .ensure({ url: src.url, sha256: SHA })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileTooLarge);
    expect((err as Error).message).toBe(
      `cannot fetch ${src.url}: it went on past ${MiB} bytes, more than fit: the ${MiB} bytes left in the model cache (--model-cache-max ${MiB}; files in use and other transfers take the rest)`,
    );
    expect(isUnrunnable(err)).toBe(true);
    expect(fs.existsSync(cache.partialOf(SHA))).toBe(false);
    expect(src.requests()).toBe(1);
  });

  it('is a share of the disk by default', async () => {
    const src = await endless();
    const cache = new ModelCache(tmp(), undefined, log, bigDisk(2 * MiB));
    expect(cache.maxBytes).toBe(Math.floor(2 * MiB * DEFAULT_CACHE_SHARE));
    const err = await modelFiles(cache)
      .ensure({ url: src.url, sha256: SHA })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileTooLarge);
    expect((err as Error).message).toContain(`it went on past ${cache.maxBytes} bytes`);
    expect((err as Error).message).toContain(`80% of the ${2 * MiB}-byte disk, the default without --model-cache-max`);
  });

  it('refuses, before reading it, a file whose Content-Length is over the room', async () => {
    const body = randomBytes(300_000);
    const srv = await fileServer(body);
    closers.push(srv.close);
    const cache = new ModelCache(tmp(), 200_000, log);
    const err = await modelFiles(cache)
      .ensure({ url: srv.url, sha256: srv.sha256 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileTooLarge);
    expect((err as Error).message).toMatch(/^cannot fetch http:\/\/127\.0\.0\.1:\d+\/: it is 300000 bytes, more than fit: the 200000 bytes left/);
    expect(srv.seen).toHaveLength(1);
  });

  it("refuses a file whose declared length differs from the catalog's size_bytes", async () => {
    const body = randomBytes(1000);
    const srv = await fileServer(body);
    closers.push(srv.close);
    const err = await modelFiles(new ModelCache(tmp(), MiB, log))
      .ensure({ url: srv.url, sha256: srv.sha256, size_bytes: 999 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileTooLarge);
    expect((err as Error).message).toContain('the file server says it is 1000 bytes, the catalog 999');
    // The right size is fetched.
    const ok = await modelFiles(new ModelCache(tmp(), MiB, log)).ensure({ url: srv.url, sha256: srv.sha256, size_bytes: 1000 });
    expect(fs.readFileSync(ok).equals(body)).toBe(true);
  });

  it('counts files in use and the partial files of transfers under way; deletes stale partials; no more than the disk has', () => {
    const dir = tmp();
    const cache = new ModelCache(dir, 10_000, log, () => ({ totalBytes: 1 << 30, freeBytes: 1 << 30 }));
    const [used, other, stale, own] = ['1', '2', '3', '4'].map((c) => c.repeat(64)) as [string, string, string, string];
    fs.writeFileSync(cache.partialOf(used), Buffer.alloc(2000));
    cache.add(used, 'llmgw://used', new Set());
    fs.writeFileSync(cache.partialOf(other), Buffer.alloc(3000));
    fs.writeFileSync(cache.partialOf(stale), Buffer.alloc(4000));
    fs.writeFileSync(cache.partialOf(own), Buffer.alloc(500));
    // 10,000 − 2,000 in use − 3,000 of the other transfer; the own partial is part of the room it gets.
    expect(cache.room(own, new Set([used]), new Set([other])).bytes).toBe(5000);
    expect(fs.existsSync(cache.partialOf(stale))).toBe(false);
    expect(fs.existsSync(cache.partialOf(own))).toBe(true);
    // An idle cached file is evicted to make room, so it does not count.
    expect(cache.room(own, new Set(), new Set([other])).bytes).toBe(7000);
    const small = new ModelCache(tmp(), 10_000, log, () => ({ totalBytes: 1 << 30, freeBytes: 1234 }));
    expect(small.room(own, new Set(), new Set())).toEqual({ bytes: 1234, why: 'the 1234 bytes the disk under the model cache has room for' });
  });
});

describe('a replica whose file cannot fit', () => {
  it('fails at once with the reason, without restarts that would fill the disk again', async () => {
    const src = await endless();
    const stateDir = tmp();
    const files = modelFiles(new ModelCache(tmp(), MiB, log));
    const lo = 30000 + Math.floor(Math.random() * 20000);
    const s = new Supervisor({
      stateDir,
      portRange: [lo, lo + 100],
      bindHost: '127.0.0.1',
      bins: { vllm: 'vllm', sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc' },
      log,
      healthIntervalMs: 50,
      backoffBaseMs: 20,
      maxRestarts: 3,
      stopGraceMs: 1000,
      allowCommandEngine: true,
      files,
    });
    closers.push(() => s.shutdown({ stopEngines: true }));
    const shard: ShardAssignment = {
      id: 'big',
      replica_id: 'rep-big',
      model: 'm',
      profile: 'cpu',
      engine: 'command',
      source: src.url,
      rank: 1,
      shards: 2,
      gpus: [],
      gpu_indices: [],
      args: [],
      env: {},
      command: [process.execPath, '-e', 'setInterval(() => {}, 1000)', '{source}'],
      file: { url: src.url, sha256: SHA },
    };
    s.converge([shard]);
    const st = await waitFor('failed', () => s.statuses().find((x) => x.state === 'failed'));
    expect(st.error).toContain(`it went on past ${MiB} bytes, more than fit`);
    expect(st.pid).toBeUndefined();
    expect(src.requests()).toBe(1);
  });
});
