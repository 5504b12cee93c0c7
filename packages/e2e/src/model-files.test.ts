import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import { bytesText, type DownloadProgress, type EventView, type KeyCreated, type ReplicaView, type ShardView } from '@llmgw/shared';
import { bins, cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir, type Proc, type ServerProc } from './harness.js';

/**
 * Journey: a catalog model whose source is an http:// URL with its sha256, on two CPU
 * nodes that have never seen the file. Each agent fetches it from a throttled file server
 * (the first transfer is cut half-way and resumed with a Range request), verifies it,
 * and the built-in engine serves it; a restarted agent finds it in its cache; a wrong
 * checksum fails the shard, names both digests, leaves nothing behind and is recorded as
 * download-failed; a small file that comes between two heartbeats is still download-done.
 */

/** A shard as `ctl replicas -o json` shows it while its file comes (the server's half adds `download`). */
type WithDownload = ShardView & { download?: DownloadProgress };

interface Seen {
  path: string;
  range?: string;
}

/**
 * A throttled file server (8 KiB every 80 ms: about 5 s for the test model, so heartbeats
 * carry progress), Range support; the first whole-file answer for /model.gguf is dropped
 * half-way. /small.gguf is `small`, sent at once: it comes between two heartbeats.
 */
async function fileServer(body: Buffer, small: Buffer) {
  const seen: Seen[] = [];
  let dropped = false;
  const srv = http.createServer((req, res) => {
    const p = req.url ?? '';
    seen.push({ path: p, ...(req.headers.range ? { range: req.headers.range } : {}) });
    if (p === '/small.gguf') return void res.writeHead(200, { 'content-length': small.length }).end(small);
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    if (m) res.writeHead(206, { 'content-length': body.length - start, 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
    else res.writeHead(200, { 'content-length': body.length });
    const dropAt = p === '/model.gguf' && !m && !dropped ? ((dropped = true), Math.floor(body.length / 2)) : Infinity;
    let at = start;
    const tick = () => {
      if (res.destroyed) return;
      const end = Math.min(at + 8 * 1024, body.length, dropAt);
      res.write(body.subarray(at, end));
      at = end;
      if (at >= dropAt) return void setTimeout(() => res.socket?.destroy(), 20);
      if (at >= body.length) return void res.end();
      setTimeout(tick, 80);
    };
    tick();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))),
  };
}

let server: ServerProc;
let client: OpenAI;
let files: Awaited<ReturnType<typeof fileServer>>;
let sha: string;
let size: number;
let small: { sha: string; size: number };
const wrong = 'f'.repeat(64);
const agents = new Map<string, Proc & { stateDir: string }>();
const agentArgs = ['--stop-engines-on-exit', '--restart-backoff', '0.2'];

const replicas = async (model = 'tiny') => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas'])).filter((r) => r.model === model);
const fetches = (p: string) => files.seen.filter((s) => s.path === p).length;

beforeAll(async () => {
  const dir = tmpDir('llmgw-files-');
  const model = path.join(dir, 'tiny.gguf');
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', model, '--seed', '7']);
  const body = fs.readFileSync(model);
  sha = createHash('sha256').update(body).digest('hex');
  size = body.length;
  // Another file, so that it is fetched for itself and not found among tiny's.
  execFileSync(process.execPath, [bins.agent, 'make-test-model', '--out', path.join(dir, 'small.gguf'), '--seed', '8']);
  const smallBody = fs.readFileSync(path.join(dir, 'small.gguf'));
  small = { sha: createHash('sha256').update(smallBody).digest('hex'), size: smallBody.length };
  files = await fileServer(body, smallBody);
  const catalog = path.join(dir, 'catalog.yaml');
  // min_memory_gb: this journey is about the transfer, not the header estimate of a URL
  // source; 5 GB on 8 GB nodes puts one replica on each, so both agents fetch.
  fs.writeFileSync(
    catalog,
    `models:
  - name: tiny
    source: ${files.url}/model.gguf
    sha256: ${sha}
    scaling: { min: 2, max: 2 }
    profiles:
      - { name: cpu, engine: node-llama-cpp, min_memory_gb: 5, startup_timeout_s: 60 }
  - name: bad
    source: ${files.url}/bad.gguf
    sha256: ${wrong}
    profiles:
      - { name: cpu, engine: node-llama-cpp, min_memory_gb: 0.5 }
  - name: small
    source: ${files.url}/small.gguf
    sha256: ${small.sha}
    profiles:
      - { name: cpu, engine: node-llama-cpp, min_memory_gb: 0.5 }
`,
  );
  server = await startServer({ catalog });
  for (const id of ['cpu-1', 'cpu-2']) agents.set(id, startAgent({ server: server.adminUrl, nodeId: id, proc: 'cpu-8gb', args: agentArgs }));
}, 30_000);

afterAll(async () => {
  await files.close();
  await cleanup();
  removeTmp();
});

describe('a model file fetched by the agents that run it', () => {
  it('shows its progress in ctl replicas while it comes', async () => {
    // As the agent reported it (ShardStatus.download) …
    const download = await eventually(
      async () => (await replicas()).flatMap((r) => r.shards as WithDownload[]).find((s) => s.download)?.download,
      20_000,
      'a download in ctl replicas -o json',
    );
    expect(download.total_bytes).toBe(size);
    expect(download.done_bytes).toBeLessThan(size);
    // … and as the operator reads it.
    const line = await eventually(
      async () => (await ctl(server.adminUrl, ['replicas'])).stdout.match(new RegExp(`downloading \\d+% \\(\\S+ (\\S+ )?of ${bytesText(size)}, [^)]*\\)`))?.[0],
      10_000,
      'a download in ctl replicas',
    );
    expect(line).toMatch(/^downloading \d+% \(/);
    expect((await replicas()).every((r) => r.state !== 'ready')).toBe(true);
  });

  it('both replicas become ready from the verified files, and a chat completion is served', async () => {
    const ready = await eventually(
      async () => {
        const rs = await replicas();
        return rs.length === 2 && rs.every((r) => r.state === 'ready') ? rs : undefined;
      },
      60_000,
      'two ready replicas',
    );
    const nodes = new Set(ready.flatMap((r) => r.shards.map((s) => s.node)));
    expect(nodes.size).toBe(2);
    for (const node of nodes) {
      const cached = path.join(agents.get(node)!.stateDir, 'models', 'sha256', sha);
      expect(createHash('sha256').update(fs.readFileSync(cached)).digest('hex')).toBe(sha);
    }
    const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
    client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, seed: 3 });
    expect(chat.usage!.completion_tokens).toBe(8);
  }, 70_000);

  it('the transfer cut half-way resumed with a Range request', () => {
    // From the last byte the agent wrote: at most the half that was sent before the cut.
    const from = files.seen
      .filter((s) => s.path === '/model.gguf')
      .map((s) => Number(/^bytes=(\d+)-$/.exec(s.range ?? '')?.[1]))
      .filter((n) => n > 0);
    expect(from).toHaveLength(1);
    expect(from[0]).toBeLessThanOrEqual(Math.floor(size / 2));
  });

  it('an agent restarted (its engine stopped with it) starts the engine again from its cache, without a transfer', async () => {
    const node = (await replicas())[0]!.shards[0]!.node;
    const before = agents.get(node)!;
    const count = fetches('/model.gguf');
    await before.stop();
    const after = startAgent({ server: server.adminUrl, nodeId: node, proc: 'cpu-8gb', stateDir: before.stateDir, args: agentArgs });
    agents.set(node, after);
    await after.waitFor(/engine ready/, 30_000);
    await eventually(async () => (await replicas()).filter((r) => r.state === 'ready').length === 2, 30_000, 'both ready again');
    expect(fetches('/model.gguf')).toBe(count);
    expect(after.output()).not.toContain('fetching a model file');
  }, 70_000);

  it('a wrong checksum fails the shard with both digests; nothing is served; the bad file is gone', async () => {
    const failed = await eventually(async () => (await replicas('bad')).find((r) => r.state === 'failed'), 30_000, 'bad failed');
    const error = [failed.error, ...failed.shards.map((s) => s.error)].join('\n');
    expect(error).toContain(wrong);
    expect(error).toContain(sha);
    const node = failed.shards[0]!.node;
    const cache = path.join(agents.get(node)!.stateDir, 'models');
    expect(fs.readdirSync(path.join(cache, 'sha256')).filter((f) => f !== small.sha)).toEqual([sha]);
    expect(fs.readdirSync(path.join(cache, 'partial'))).toEqual([]);
    await expect(client.chat.completions.create({ model: 'bad', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 })).rejects.toThrow(
      /503|no replica|not ready|unavailable/i,
    );
  }, 40_000);

  it('a wrong checksum is recorded as download-failed, not engine-failed', async () => {
    const events = await eventually(
      async () => {
        const es = await ctlJson<EventView[]>(server.adminUrl, ['events', '--model', 'bad']);
        return es.some((e) => e.reason === 'download-failed') ? es : undefined;
      },
      20_000,
      'download-failed for bad',
    );
    const failed = events.find((e) => e.reason === 'download-failed')!;
    expect(failed.type).toBe('Warning');
    expect(failed.message).toContain(`${files.url}/bad.gguf`);
    expect(failed.message).toContain(wrong);
    expect(events.map((e) => e.reason)).not.toContain('engine-failed');
  });

  it('a small file that came between two heartbeats is recorded as download-done, with its size and time', async () => {
    const done = await eventually(
      async () => (await ctlJson<EventView[]>(server.adminUrl, ['events', '--model', 'small'])).find((e) => e.reason === 'download-done'),
      30_000,
      'download-done for small',
    );
    expect(done.message).toMatch(new RegExp(`^downloaded ${files.url}/small\\.gguf to cpu-[12] \\(${bytesText(small.size)} in \\d+ m?s, \\S+ [KMG]?B/s\\)$`));
    expect((await ctl(server.adminUrl, ['events', '--model', 'small'])).stdout).toContain(`(${bytesText(small.size)} in `);
  });
});
