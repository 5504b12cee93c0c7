import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildTestModel, encodeGguf, estimateForSource } from '@llmgw/gguf';
import { pino } from 'pino';
import { tempDirs } from '../../test/temp-dirs.js';
import { HeaderEstimates, rangeReader } from './header-estimates.js';

/** The server reads a fetched GGUF source's header for its memory need: real file servers on 127.0.0.1:0. */
const tmp = tempDirs('llmgw-headers-', afterAll);
const DIGEST = 'ab'.repeat(32);
const log = pino({ level: 'silent' });
const bytes = buildTestModel({ seed: 1 });
// A vocabulary of 2 MB of strings puts the header past the first Range request.
const big = encodeGguf({
  metadata: [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: Array.from({ length: 200_000 }, (_, i) => `token-${i}`) }],
  ],
  tensors: [{ name: 'w', dims: [1 << 20], data: new Float32Array(1 << 20) }],
});
let dir: string;
let expectedMb: number;
let base: string;
const seen: { path: string; range?: string }[] = [];
let server: http.Server;

beforeAll(async () => {
  dir = tmp();
  fs.writeFileSync(path.join(dir, 'm.gguf'), bytes);
  expectedMb = Math.ceil((await estimateForSource(path.join(dir, 'm.gguf')))!.totalMb);
  // /ranged takes Range requests, /plain ignores them, /missing is a 404.
  server = http.createServer((req, res) => {
    seen.push({ path: req.url ?? '', ...(req.headers.range ? { range: req.headers.range } : {}) });
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    const file = req.url === '/ranged.gguf' ? bytes : req.url === '/big.gguf' ? big : undefined;
    if (file && m) {
      const from = Number(m[1]);
      const to = Math.min(Number(m[2]), file.length - 1);
      res.writeHead(206, { 'content-range': `bytes ${from}-${to}/${file.length}`, 'content-length': to - from + 1 });
      return res.end(file.subarray(from, to + 1));
    }
    if (req.url === '/overlong.gguf' && m) {
      // The range asked for, then bytes without end: a broken (or hostile) file server.
      res.writeHead(206, { 'content-range': `bytes ${m[1]}-${m[2]}/${bytes.length}` });
      res.write(bytes.subarray(Number(m[1]), Number(m[2]) + 1));
      const more = setInterval(() => res.write(Buffer.alloc(64 * 1024)), 5);
      res.on('close', () => clearInterval(more));
      return;
    }
    if (req.url === '/plain.gguf') {
      res.writeHead(200, { 'content-length': bytes.length });
      return res.end(bytes);
    }
    res.writeHead(404).end('no');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Looks up until the reading ends (onChange), then once more. */
async function settle(h: HeaderEstimates, ended: { count: number }, source: string) {
  const wanted = [{ source, sha256: DIGEST }];
  const first = h.lookup(wanted);
  const before = ended.count;
  while (ended.count === before) await new Promise((r) => setTimeout(r, 5));
  return { first, then: h.lookup(wanted) };
}

describe('HeaderEstimates', () => {
  it.each([
    ['a file server that takes Range requests', '/ranged.gguf'],
    ['one that ignores Range (read only as far as the header)', '/plain.gguf'],
  ])('%s: pending while read, then the same estimate an agent makes from the file', async (_what, p) => {
    const ended = { count: 0 };
    const h = new HeaderEstimates({ log, onChange: () => ended.count++ });
    const { first, then } = await settle(h, ended, `${base}${p}`);
    expect([...first.pending]).toEqual([`${base}${p}`]);
    expect([[...then.pending], [...then.estimates]]).toEqual([[], [[`${base}${p}`, expectedMb]]]);
    expect(seen.filter((s) => s.path === p).map((s) => s.range)).toEqual([`bytes=0-${(1 << 20) - 1}`]);
    await h.close();
  });

  it('a header longer than the first request is read on with Range requests, never the weights', async () => {
    const ended = { count: 0 };
    const h = new HeaderEstimates({ log, onChange: () => ended.count++ });
    const { then } = await settle(h, ended, `${base}/big.gguf`);
    expect([...then.estimates].map(([s]) => s)).toEqual([`${base}/big.gguf`]);
    const ranges = seen.filter((s) => s.path === '/big.gguf').map((s) => s.range);
    expect(ranges[0]).toBe(`bytes=0-${(1 << 20) - 1}`);
    expect(ranges[1]).toMatch(new RegExp(`^bytes=${1 << 20}-\\d+$`));
    const last = Number(/-(\d+)$/.exec(ranges.at(-1)!)?.[1]);
    expect(last).toBeLessThan(big.length - (1 << 21));
    await h.close();
  });

  it('a 206 that sends more than the range asked for is read only as far as asked, not to its end', async () => {
    const { size, read } = await rangeReader(`${base}/overlong.gguf`);
    expect([size, (await read(1 << 10)).equals(bytes.subarray(0, 1 << 10))]).toEqual([bytes.length, true]);
  }, 5_000);

  it('an llmgw:// source is read from --models-dir', async () => {
    const ended = { count: 0 };
    const h = new HeaderEstimates({ modelsDir: dir, log, onChange: () => ended.count++ });
    const { then } = await settle(h, ended, 'llmgw://m.gguf');
    expect([...then.estimates]).toEqual([['llmgw://m.gguf', expectedMb]]);
    await h.close();
  });

  it('a file it cannot read holds nothing back and gives no estimate; it is tried again a minute later', async () => {
    const ended = { count: 0 };
    let now = 1_000_000;
    const warnings: string[] = [];
    const h = new HeaderEstimates({
      log: { info: () => {}, warn: (_o: unknown, msg: string) => warnings.push(msg) } as unknown as typeof log,
      onChange: () => ended.count++,
      now: () => now,
    });
    const { then } = await settle(h, ended, `${base}/missing.gguf`);
    expect([[...then.pending], [...then.estimates]]).toEqual([[], []]);
    expect(warnings).toEqual([
      `cannot read the GGUF header of ${base}/missing.gguf to estimate its memory (answered HTTP 404): placing it without a memory need; set min_memory_gb on the profile, or make the file readable by the server`,
    ]);
    const asked = seen.filter((s) => s.path === '/missing.gguf').length;
    h.lookup([{ source: `${base}/missing.gguf`, sha256: DIGEST }]);
    expect(seen.filter((s) => s.path === '/missing.gguf').length).toBe(asked);
    now += 60_000;
    const again = await settle(h, ended, `${base}/missing.gguf`);
    // A retry does not hold the model back.
    expect([...again.first.pending]).toEqual([]);
    expect(seen.filter((s) => s.path === '/missing.gguf').length).toBe(asked + 1);
    await h.close();
  });
});
