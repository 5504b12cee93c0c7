import { afterAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import got from 'got';
import { pino } from 'pino';
import type { DownloadProgress, ShardAssignment, ShardStatus } from '@llmgw/shared';
import { ChecksumMismatch } from './files/download.js';
import { ModelCache } from './files/cache.js';
import { ModelFiles, type FileSource, type WantedFile } from './files/store.js';
import { fileServer } from './files/test-file-server.js';
import { Supervisor } from './supervisor/index.js';
import { waitFor } from './testing.js';

const dirs: string[] = [];
const sups: Supervisor[] = [];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const s of sups) await s.shutdown({ stopEngines: true });
  for (const c of closers) await c();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const SHA = 'ab'.repeat(32);

/** A FileSource whose fetches the test settles by hand. */
function handFiles() {
  const calls: WantedFile[] = [];
  const signals: (AbortSignal | undefined)[] = [];
  let settle: { resolve: (p: string) => void; reject: (e: Error) => void } | undefined;
  let progress: DownloadProgress | undefined;
  const source: FileSource = {
    ensure: (f, signal) => {
      calls.push(f);
      signals.push(signal);
      return new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
    },
    progress: () => progress,
  };
  return {
    source,
    calls,
    signals,
    setProgress: (p: DownloadProgress | undefined) => (progress = p),
    resolve: (p: string) => settle?.resolve(p),
    reject: (e: Error) => settle?.reject(e),
  };
}

function supervisor(files: FileSource) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-supf-'));
  dirs.push(dir);
  const lo = 30000 + Math.floor(Math.random() * 20000);
  const s = new Supervisor({
    stateDir: dir,
    portRange: [lo, lo + 100],
    bindHost: '127.0.0.1',
    bins: { vllm: 'vllm', sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc' },
    log: pino({ level: 'silent' }),
    healthIntervalMs: 50,
    backoffBaseMs: 20,
    maxRestarts: 3,
    stopGraceMs: 1000,
    allowCommandEngine: true,
    files,
  });
  sups.push(s);
  return { s, dir };
}

/** A follower (no HTTP: alive is ready) whose argv ends with the source it was given. */
function shard(over: Partial<ShardAssignment> = {}): ShardAssignment {
  return {
    id: 'f1',
    replica_id: 'rep-f1',
    model: 'm',
    profile: 'cpu',
    engine: 'command',
    source: 'http://files.example/m.gguf',
    rank: 1,
    shards: 2,
    gpus: [],
    gpu_indices: [],
    args: [],
    env: {},
    command: [process.execPath, '-e', 'setInterval(() => {}, 1000)', '{source}'],
    file: { url: 'http://files.example/m.gguf', sha256: SHA },
    ...over,
  };
}

describe('Supervisor with model files', () => {
  it('reports the download while the file comes, then starts the engine on the cached path', async () => {
    const f = handFiles();
    const { s, dir } = supervisor(f.source);
    f.setProgress({ done_bytes: 10, total_bytes: 100, bytes_per_s: 5 });
    s.converge([shard()]);
    await waitFor('fetch asked', () => f.calls.length === 1);
    expect(f.calls[0]).toEqual({ url: 'http://files.example/m.gguf', sha256: SHA });
    expect(s.statuses()[0]).toMatchObject({ state: 'starting', download: { done_bytes: 10, total_bytes: 100, bytes_per_s: 5 } });
    expect(s.filesInUse()).toEqual(new Set([SHA]));
    f.setProgress(undefined);
    f.resolve('/cache/sha256/abab');
    const st = await waitFor('ready', () => s.statuses().find((x) => x.state === 'ready'));
    expect(st.download).toBeUndefined();
    expect(fs.readFileSync(path.join(dir, 'logs', 'f1.log'), 'utf8')).toContain('setInterval(() => {}, 1000) /cache/sha256/abab');
  });

  it('a checksum mismatch fails the shard at once with both digests; no engine runs', async () => {
    const f = handFiles();
    const { s } = supervisor(f.source);
    s.converge([shard({ id: 'f2' })]);
    await waitFor('fetch asked', () => f.calls.length === 1);
    f.reject(new ChecksumMismatch('http://files.example/m.gguf', SHA, 'cd'.repeat(32)));
    const st = await waitFor('failed', () => s.statuses().find((x) => x.state === 'failed'));
    expect(st.error).toContain(SHA);
    expect(st.error).toContain('cd'.repeat(32));
    expect(st.pid).toBeUndefined();
    expect(f.calls).toHaveLength(1);
  });

  it('a transfer that failed is retried after a backoff, like a crash', async () => {
    const f = handFiles();
    const { s } = supervisor(f.source);
    s.converge([shard({ id: 'f3' })]);
    await waitFor('fetch asked', () => f.calls.length === 1);
    f.reject(new Error('cannot fetch http://files.example/m.gguf: ECONNRESET'));
    await waitFor('retried', () => f.calls.length === 2);
    expect(s.statuses()[0]).toMatchObject({ state: 'starting', error: expect.stringContaining('ECONNRESET') });
    f.resolve('/cache/x');
    await waitFor('ready', () => s.statuses().find((x) => x.state === 'ready'));
  });

  it('a shard retired while its file comes tells the file source it no longer wants it', async () => {
    const f = handFiles();
    const { s } = supervisor(f.source);
    s.converge([shard({ id: 'f5' })]);
    await waitFor('fetch asked', () => f.calls.length === 1);
    expect(f.signals[0]?.aborted).toBe(false);
    s.converge([]);
    expect(f.signals[0]?.aborted).toBe(true);
    expect(s.filesInUse()).toEqual(new Set());
  });

  it('without a model cache, a shard with a file fails saying so', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-supf-'));
    dirs.push(dir);
    const s = new Supervisor({
      stateDir: dir,
      portRange: [45000, 45010],
      bindHost: '127.0.0.1',
      bins: { vllm: 'v', sglangPython: 'p', llamaServer: 'l', nodeLlamaCpp: 'n' },
      log: pino({ level: 'silent' }),
      allowCommandEngine: true,
    });
    sups.push(s);
    s.converge([shard({ id: 'f4' })]);
    const st = await waitFor('failed', () => s.statuses().find((x) => x.state === 'failed'));
    expect(st.error).toMatch(/no model cache/);
  });
});

/** The real model files over a cache in `dir`. */
function realFiles(dir: string): ModelFiles {
  const log = pino({ level: 'silent' });
  return new ModelFiles({
    cache: new ModelCache(dir, undefined, log),
    server: 'http://127.0.0.1:1',
    serverClient: got,
    inUse: () => new Set(),
    log,
    retryDelayMs: 10,
  });
}

describe('Supervisor: what a shard says of its fetched file (issue 30 item 9)', () => {
  it('a file fetched from a real file server is on the status as fetched, however fast it came; one found in the cache is not', async () => {
    const body = randomBytes(20_000);
    const srv = await fileServer(body);
    closers.push(srv.close);
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-supf-cache-'));
    dirs.push(cache);
    const file = { url: `${srv.url}/small.gguf`, sha256: srv.sha256 };
    const first = supervisor(realFiles(cache)).s;
    first.converge([shard({ id: 'g1', file })]);
    const ready = await waitFor('ready', () => first.statuses().find((x) => x.state === 'ready'));
    expect(ready.fetched).toEqual({ bytes: body.length, ms: expect.any(Number) });
    expect(ready.download_failed).toBeUndefined();
    // Another agent on the same cache: nothing was fetched for its shard.
    const again = supervisor(realFiles(cache)).s;
    again.converge([shard({ id: 'g2', file })]);
    const cached = await waitFor('ready from the cache', () => again.statuses().find((x) => x.state === 'ready'));
    expect(cached.fetched).toBeUndefined();
    expect(srv.seen).toHaveLength(1);
  });

  it('a wrong sha256 and a file server that refuses are download failures; an engine that exits is not', async () => {
    const srv = await fileServer(randomBytes(1000));
    closers.push(srv.close);
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-supf-cache-'));
    dirs.push(cache);
    const { s } = supervisor(realFiles(cache));
    s.converge([shard({ id: 'g3', file: { url: `${srv.url}/bad.gguf`, sha256: 'f'.repeat(64) } })]);
    const bad = await waitFor('failed', () => s.statuses().find((x) => x.state === 'failed'));
    expect(bad).toMatchObject({ download_failed: true, error: expect.stringContaining('f'.repeat(64)) });
    const refusing = await fileServer(Buffer.from('x'), { status: 404 });
    closers.push(refusing.close);
    const seen: ShardStatus[] = [];
    s.events.on('change', () => seen.push(...s.statuses().filter((x) => x.id === 'g4')));
    s.converge([shard({ id: 'g4', file: { url: `${refusing.url}/gone.gguf`, sha256: 'e'.repeat(64) } })]);
    // Retried like a crash, and a download's failure while it waits, while it tries again, and once it gives up.
    const gone = await waitFor('given up', () => s.statuses().find((x) => x.id === 'g4' && x.state === 'failed'));
    expect(gone).toMatchObject({ download_failed: true, error: expect.stringContaining('404') });
    const failing = seen.filter((x) => x.error?.includes('404'));
    expect(failing.length).toBeGreaterThan(1);
    expect(failing.filter((x) => !x.download_failed)).toEqual([]);
    s.converge([shard({ id: 'g5', file: { url: `${srv.url}/ok.gguf`, sha256: srv.sha256 }, command: [process.execPath, '-e', 'process.exit(3)'] })]);
    const crashed = await waitFor('crashed', () => s.statuses().find((x) => x.id === 'g5' && x.error?.includes('exited with code 3')));
    expect(crashed.fetched).toEqual({ bytes: 1000, ms: expect.any(Number) });
    expect(crashed.download_failed).toBeUndefined();
  });
});
