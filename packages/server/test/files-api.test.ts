import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { nodeAuth, seedCredential } from './credentials.js';
import { makeServerSettings, send } from './live-server.js';
import { tempDirs } from './temp-dirs.js';
import { startServer, type RunningServer } from '../src/server.js';
import { SqliteStore } from '../src/store/sqlite.js';

/** `GET /agent/v1/files/:name` on a real server: who may fetch, ranges to resume, and nothing outside --models-dir. */
const tmp = tempDirs('llmgw-files-', afterAll);
const catalog = { models: [], resolve: () => undefined, suggest: () => [] };
const BYTES = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

async function serve(modelsDir: string | undefined): Promise<{ s: RunningServer; dataDir: string }> {
  const dataDir = tmp();
  const seed = new SqliteStore(dataDir);
  await seedCredential(seed, 'node-a');
  await seed.close();
  const s = await startServer(makeServerSettings(dataDir, modelsDir === undefined ? {} : { modelsDir }), catalog, pino({ level: 'silent' }));
  return { s, dataDir };
}

describe('the model files agents fetch', () => {
  let s: RunningServer;
  let dir: string;
  let outside: string;
  beforeAll(async () => {
    dir = tmp();
    fs.writeFileSync(path.join(dir, 'm.gguf'), BYTES);
    fs.writeFileSync(path.join(dir, '.hidden'), 'secret');
    fs.mkdirSync(path.join(dir, 'sub'));
    outside = path.join(dir, '..', `${path.basename(dir)}-outside.txt`);
    fs.writeFileSync(outside, 'SECRET-CONTENT');
    ({ s } = await serve(dir));
  });
  afterAll(async () => {
    await s.close();
    fs.rmSync(outside, { force: true });
  });
  const get = (p: string, headers: Record<string, string> = nodeAuth) => send(s.adminUrl, { path: p, headers });

  it('streams the whole file to a node with its credential, saying it takes ranges', async () => {
    const r = await fetch(`${s.adminUrl}/agent/v1/files/m.gguf`, { headers: nodeAuth });
    expect([r.status, r.headers.get('content-length'), r.headers.get('accept-ranges')]).toEqual([200, '1000', 'bytes']);
    expect(Buffer.from(await r.arrayBuffer())).toEqual(BYTES);
  });

  it('answers a Range request with 206 and Content-Range, from where an interrupted transfer stopped', async () => {
    const r = await fetch(`${s.adminUrl}/agent/v1/files/m.gguf`, { headers: { ...nodeAuth, range: 'bytes=600-' } });
    expect(r.status).toBe(206);
    expect(r.headers.get('content-range')).toBe('bytes 600-999/1000');
    expect(Buffer.from(await r.arrayBuffer())).toEqual(BYTES.subarray(600));
    const beyond = await get('/agent/v1/files/m.gguf', { ...nodeAuth, range: 'bytes=5000-' });
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe('bytes */1000');
  });

  it('refuses a caller without a node credential, and the join token', async () => {
    const none = await get('/agent/v1/files/m.gguf', {});
    expect([none.status, JSON.parse(none.body)]).toEqual([401, { error: expect.stringMatching(/^missing node credential/), code: 'unauthenticated' }]);
    const join = await get('/agent/v1/files/m.gguf', { authorization: 'Bearer join' });
    expect([join.status, JSON.parse(join.body)]).toEqual([401, { error: expect.stringMatching(/^the join token only joins/), code: 'unauthenticated' }]);
  });

  it.each([
    [
      'a missing file',
      '/agent/v1/files/nope.gguf',
      /^no model file "nope\.gguf" in --models-dir \(.*\): copy it there, or fix the catalog's llmgw:\/\/ source$/,
    ],
    ['a hidden file', '/agent/v1/files/.hidden', /^no model file ".hidden" starts with a dot/],
    ['an escaped way out', '/agent/v1/files/..%2F' + 'x', /^no model file "..\/x" has a path in it/],
    ['an encoded backslash', '/agent/v1/files/..%5Cx', /has a path in it/],
    ['a directory', '/agent/v1/files/sub', /^no model file "sub" in --models-dir/],
  ])('gives a clear 404 for %s', async (_what, p, message) => {
    const r = await get(p);
    expect(r.status).toBe(404);
    expect(r.body).not.toContain('SECRET-CONTENT');
    expect((JSON.parse(r.body) as { error: string }).error).toMatch(message);
  });

  it('never serves a file outside the directory, however the path is written', async () => {
    for (const p of [
      `/agent/v1/files/../${path.basename(outside)}`,
      `/agent/v1/files/%2E%2E%2F${path.basename(outside)}`,
      `/agent/v1/files/..%2f..%2f${path.basename(outside)}`,
    ]) {
      const r = await get(p);
      expect(r.status).toBe(404);
      expect(r.body).not.toContain('SECRET-CONTENT');
    }
  });

  it('without --models-dir, says how to serve files', async () => {
    const { s: bare } = await serve(undefined);
    try {
      const r = await send(bare.adminUrl, { path: '/agent/v1/files/m.gguf', headers: nodeAuth });
      expect([r.status, JSON.parse(r.body)]).toEqual([
        404,
        { error: 'this server serves no model files: start llmgw-server with --models-dir DIR for llmgw:// sources', code: 'not_found' },
      ]);
    } finally {
      await bare.close();
    }
  });
});
