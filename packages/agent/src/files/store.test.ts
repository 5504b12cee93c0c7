import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import got from 'got';
import { pino } from 'pino';
import { ModelCache } from './cache.js';
import { parseSourceHeaders } from './headers.js';
import { isUnrunnable, ModelFiles, type ModelFilesOptions } from './store.js';
import { connectProxy, fileServer, type FileServerOptions } from './test-file-server.js';

const log = pino({ level: 'silent' });
const dirs: string[] = [];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-files-'));
  dirs.push(d);
  return d;
}

async function server(body: Buffer, o: FileServerOptions = {}) {
  const srv = await fileServer(body, o);
  closers.push(srv.close);
  return srv;
}

/** ModelFiles over a cache in `dir`, with overrides. */
function files(dir: string, over: Partial<ModelFilesOptions> & { maxBytes?: number } = {}, inUse = new Set<string>()) {
  return new ModelFiles({
    cache: new ModelCache(dir, over.maxBytes, log),
    server: 'http://127.0.0.1:1',
    serverClient: got,
    inUse: () => inUse,
    log,
    retryDelayMs: 10,
    ...over,
  });
}

describe('ModelFiles', () => {
  it('two shards of one file fetch it once; a new agent on the same cache does not fetch again', async () => {
    const body = randomBytes(100_000);
    const srv = await server(body, { chunkBytes: 10_000, pauseMs: 2 });
    const dir = tmp();
    const f = files(dir);
    const want = { url: `${srv.url}/m.gguf`, sha256: srv.sha256.toUpperCase() };
    const [a, b] = await Promise.all([f.ensure(want), f.ensure(want)]);
    expect(a).toBe(path.join(dir, 'sha256', srv.sha256));
    expect(b).toBe(a);
    expect(fs.readFileSync(a).equals(body)).toBe(true);
    expect(srv.seen).toHaveLength(1);
    const again = files(dir);
    expect(await again.ensure(want)).toBe(a);
    expect(srv.seen).toHaveLength(1);
    expect(again.list()).toEqual([{ sha256: srv.sha256, source: want.url, size_bytes: body.length, last_used_ms: expect.any(Number), in_use: false }]);
  });

  it('reports progress while the file comes, and none once it is cached', async () => {
    const body = randomBytes(200_000);
    const srv = await server(body, { chunkBytes: 10_000, pauseMs: 10 });
    const f = files(tmp());
    const done = f.ensure({ url: srv.url, sha256: srv.sha256 });
    for (let i = 0; i < 200 && !(f.progress(srv.sha256)?.done_bytes ?? 0); i++) await new Promise((r) => setTimeout(r, 5));
    const p = f.progress(srv.sha256);
    expect(p?.total_bytes).toBe(body.length);
    expect(p?.done_bytes).toBeGreaterThan(0);
    expect(p?.done_bytes).toBeLessThan(body.length);
    await done;
    expect(f.progress(srv.sha256)).toBeUndefined();
  });

  it('stops the transfer when the last shard waiting for it leaves, and resumes it later', async () => {
    const body = randomBytes(300_000);
    const srv = await server(body, { chunkBytes: 10_000, pauseMs: 20 });
    const dir = tmp();
    const f = files(dir);
    const want = { url: srv.url, sha256: srv.sha256 };
    const [one, two] = [new AbortController(), new AbortController()];
    const first = f.ensure(want, one.signal);
    const second = f.ensure(want, two.signal);
    for (let i = 0; i < 200 && (f.progress(srv.sha256)?.done_bytes ?? 0) < 50_000; i++) await new Promise((r) => setTimeout(r, 5));
    one.abort();
    await expect(first).rejects.toThrow(/no shard wants the file/);
    expect(f.progress(srv.sha256)).toBeDefined(); // the other shard still waits: the transfer goes on
    two.abort();
    await expect(second).rejects.toThrow(/no shard wants the file/);
    for (let i = 0; i < 200 && f.progress(srv.sha256); i++) await new Promise((r) => setTimeout(r, 5));
    const kept = fs.statSync(path.join(dir, 'partial', srv.sha256)).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(body.length);
    expect(fs.readFileSync(await f.ensure(want)).equals(body)).toBe(true);
    expect(srv.seen.map((s) => s.range)).toEqual([undefined, `bytes=${kept}-`]);
  });

  it('a wrong checksum fails for good and leaves nothing in the cache', async () => {
    const srv = await server(randomBytes(1000));
    const dir = tmp();
    const f = files(dir);
    const err = await f.ensure({ url: srv.url, sha256: '0'.repeat(64) }).catch((e: unknown) => e);
    expect(isUnrunnable(err)).toBe(true);
    expect((err as Error).message).toContain(srv.sha256);
    expect(fs.readdirSync(path.join(dir, 'sha256'))).toEqual([]);
    expect(fs.readdirSync(path.join(dir, 'partial'))).toEqual([]);
    expect(f.list()).toEqual([]);
  });

  it('llmgw://NAME asks the server for /agent/v1/files/NAME with the node credential', async () => {
    const srv = await server(Buffer.from('gguf bytes'));
    const f = files(tmp(), { server: srv.url, auth: { header: () => Promise.resolve('Bearer node-cred'), rejected: () => undefined } });
    await f.ensure({ url: 'llmgw://qwen 0.5b.gguf', sha256: srv.sha256 });
    expect(srv.seen[0]?.url).toBe('/agent/v1/files/qwen%200.5b.gguf');
    expect(srv.seen[0]?.headers.authorization).toBe('Bearer node-cred');
  });

  it('sends --source-header headers to their host only', async () => {
    const srv = await server(Buffer.from('private'));
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'token'), 'Bearer from-a-file\n');
    const headers = parseSourceHeaders([`127.0.0.1=Authorization: @${path.join(dir, 'token')}`, 'other.example=X-Key: no']);
    await files(dir, { headers }).ensure({ url: srv.url, sha256: srv.sha256 });
    expect(srv.seen[0]?.headers.authorization).toBe('Bearer from-a-file');
    expect(srv.seen[0]?.headers['x-key']).toBeUndefined();
  });

  it('does not send --source-header headers on to the host a redirect points to', async () => {
    const srv = await server(Buffer.from('moved'));
    const seen: http.IncomingHttpHeaders[] = [];
    const redirect = http.createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(302, { location: `${srv.url}/cdn/m.gguf` }).end();
    });
    await new Promise<void>((r) => redirect.listen(0, 'localhost', r));
    closers.push(() => new Promise<void>((r) => redirect.close(() => r())));
    const origin = `localhost:${(redirect.address() as AddressInfo).port}`;
    const headers = parseSourceHeaders([`${origin}=X-Api-Key: s3cret`]);
    await files(tmp(), { headers }).ensure({ url: `http://${origin}/m.gguf`, sha256: srv.sha256 });
    expect(seen[0]?.['x-api-key']).toBe('s3cret');
    expect(srv.seen[0]?.headers['x-api-key']).toBeUndefined();
  });

  describe('proxies', () => {
    const saved = { ...process.env };
    afterEach(() => {
      for (const k of ['LLMGW_HTTP_PROXY', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy']) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    });

    it('goes through LLMGW_HTTP_PROXY', async () => {
      const srv = await server(Buffer.from('via proxy'));
      const proxy = await connectProxy();
      closers.push(proxy.close);
      process.env.LLMGW_HTTP_PROXY = proxy.url;
      await files(tmp()).ensure({ url: srv.url, sha256: srv.sha256 });
      expect(proxy.targets).toEqual([new URL(srv.url).host]);
    });

    it('goes through HTTP_PROXY, unless NO_PROXY names the host', async () => {
      const srv = await server(Buffer.from('via the standard proxy'));
      const proxy = await connectProxy();
      closers.push(proxy.close);
      process.env.HTTP_PROXY = proxy.url;
      await files(tmp()).ensure({ url: srv.url, sha256: srv.sha256 });
      expect(proxy.targets).toHaveLength(1);
      process.env.NO_PROXY = '127.0.0.1';
      await files(tmp()).ensure({ url: srv.url, sha256: srv.sha256 });
      expect(proxy.targets).toHaveLength(1);
      expect(srv.seen).toHaveLength(2);
    });
  });

  it('refuses a digest that is not hex before it names a path', async () => {
    const dir = tmp();
    const err = await files(dir)
      .ensure({ url: 'http://127.0.0.1:1/x', sha256: '../'.repeat(21) + 'x' })
      .catch((e: unknown) => e);
    expect(isUnrunnable(err)).toBe(true);
    expect((err as Error).message).toMatch(/is not 64 hex digits/);
    expect(fs.readdirSync(dir).sort()).toEqual(['partial', 'sha256']);
  });

  it('rejects a source that is not a URL as unrunnable', async () => {
    const err = await files(tmp())
      .ensure({ url: 'ftp://x/y', sha256: '0'.repeat(64) })
      .catch((e: unknown) => e);
    expect(isUnrunnable(err)).toBe(true);
    expect((err as Error).message).toMatch(/want an http\(s\):\/\/ or llmgw:\/\/ source/);
  });
});

describe('ModelCache eviction (--model-cache-max)', () => {
  it('evicts the least recently used files no shard uses, and keeps those in use', async () => {
    const bodies = [randomBytes(400), randomBytes(400), randomBytes(400)];
    const srvs = await Promise.all(bodies.map((b) => server(b)));
    const [a, b, c] = srvs.map((s) => s.sha256) as [string, string, string];
    const inUse = new Set<string>();
    const f = files(tmp(), { maxBytes: 1000 }, inUse);
    await f.ensure({ url: srvs[0]!.url, sha256: a });
    await new Promise((r) => setTimeout(r, 5));
    await f.ensure({ url: srvs[1]!.url, sha256: b });
    inUse.add(a); // the older one is in use: the newer idle one must go instead
    await f.ensure({ url: srvs[2]!.url, sha256: c });
    expect(
      f
        .list()
        .map((x) => [x.sha256, x.in_use])
        .sort(),
    ).toEqual(
      [
        [a, true],
        [c, false],
      ].sort(),
    );
  });

  it('ignores a broken index (the files are fetched again)', () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'index.json'), '{not json');
    expect(new ModelCache(dir, undefined, log).list(new Set())).toEqual([]);
  });

  it('a cached file still reaches its shard when the index cannot be written (a full disk)', async () => {
    const body = randomBytes(300);
    const srv = await server(body);
    const dir = tmp();
    const file = { url: srv.url, sha256: srv.sha256 };
    const cached = await files(dir).ensure(file);
    // The index's temporary file cannot be created: a directory holds its name.
    fs.mkdirSync(path.join(dir, `.index.json.${process.pid}.tmp`));
    await expect(files(dir).ensure(file)).resolves.toBe(cached);
  });

  it('an index that is JSON but not an index starts afresh, and junk entries are dropped, not reported', () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'index.json'), 'null');
    expect(new ModelCache(dir, undefined, log).list(new Set())).toEqual([]);
    const [good, late, negative, fraction] = ['a', 'b', 'c', 'd'].map((h) => h.repeat(64)) as [string, string, string, string];
    for (const h of [good, late, negative, fraction]) fs.writeFileSync(path.join(dir, 'sha256', h), 'x');
    const entry = (over: Record<string, unknown>) => ({ source: 'llmgw://m.gguf', size_bytes: 1, last_used_ms: 1000, ...over });
    const index = { [good]: entry({}), [late]: entry({ last_used_ms: 1e300 }), [negative]: entry({ size_bytes: -1 }), [fraction]: entry({ size_bytes: 0.5 }) };
    fs.writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ files: index }));
    expect(new ModelCache(dir, undefined, log).list(new Set()).map((f) => f.sha256)).toEqual([good]);
  });
});
