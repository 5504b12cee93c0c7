import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { Agent, fetch as trustingFetch } from 'undici';
import { SqliteStore } from './sqlite.js';

/**
 * A real full disk under the built llmgw-server: its data directory on a small tmpfs,
 * filled up while it serves. Needs root (to mount); elsewhere it says why it did not
 * run and passes.
 */
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const ADMIN = { authorization: 'Bearer admin', 'content-type': 'application/json' };

let mnt: string | undefined;
let child: ChildProcess | undefined;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Mounts a 4 MB tmpfs, or says why it cannot. */
function mountTmpfs(): string {
  if (process.getuid?.() !== 0) throw new Error('not root: mounting a tmpfs needs root');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-diskfull-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    fs.rmdirSync(dir);
    throw new Error(`mount -t tmpfs failed: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`, { cause: err });
  }
  return dir;
}

/** Writes a file until the disk says ENOSPC. */
function fill(file: string): void {
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(16 * 1024, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
}

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
  }
  if (mnt) {
    execFileSync('umount', [mnt]);
    fs.rmdirSync(mnt);
  }
});

describe('a real full disk', () => {
  it('gives 503s and degraded while full, keeps the process up, and loses no usage once there is room', async () => {
    try {
      mnt = mountTmpfs();
    } catch (err) {
      console.log(`skipped the tmpfs disk-full test: ${(err as Error).message}`);
      return;
    }
    const dataDir = path.join(mnt, 'data');
    const catalog = path.join(os.tmpdir(), `llmgw-diskfull-${process.pid}.yaml`);
    fs.writeFileSync(catalog, 'models:\n  - name: m\n    source: x\n    profiles:\n      - name: cpu\n        engine: llama.cpp\n');
    child = spawn(
      process.execPath,
      [MAIN, '--data-dir', dataDir, '--catalog', catalog, '--client-addr', '127.0.0.1:0', '--admin-addr', '127.0.0.1:0', '--cold-start-timeout', '1'],
      { env: { ...process.env, LLMGW_ADMIN_TOKEN: 'admin', LLMGW_JOIN_TOKEN: 'join' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    let urls: { admin: string; client: string } | undefined;
    for (let i = 0; i < 200 && !urls; i++, await sleep(50)) {
      const line = out.split('\n').find((l) => l.includes('llmgw-server listening'));
      if (line) urls = JSON.parse(line) as { admin: string; client: string };
    }
    expect(urls).toBeDefined();
    const { admin, client } = urls!;
    // The admin listener is https with the CA the server made in its data directory.
    const dispatcher = new Agent({ connect: { ca: fs.readFileSync(path.join(dataDir, 'tls', 'ca.pem'), 'utf8') } });
    const adminFetch = (url: string, init: Parameters<typeof trustingFetch>[1] = {}) => trustingFetch(url, { ...init, dispatcher });
    const api = (p: string, init: Parameters<typeof trustingFetch>[1] = {}) => adminFetch(`${admin}${p}`, { ...init, headers: ADMIN });
    const created = await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'app' }) });
    expect(created.status).toBe(201);
    const { secret } = (await created.json()) as { secret: string };
    // No node runs m: each request is answered 503 no_ready_replica and counted as one request with an error.
    let sent = 0;
    const send = async (n: number) => {
      for (let i = 0; i < n; i++, sent++) {
        const res = await fetch(`${client}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: '{"model":"m","messages":[{"role":"user","content":"hi"}]}',
        });
        expect(res.status).toBe(503);
        await res.text();
      }
    };
    const health = async () => (await (await adminFetch(`${admin}/healthz`)).json()) as { status: string; reason?: string };
    await send(3);

    const filler = path.join(mnt, 'filler');
    fill(filler);
    await send(4);
    for (let i = 0; i < 100 && (await health()).status === 'ok'; i++) await sleep(100);
    expect(await health()).toEqual({
      status: 'degraded',
      reason: expect.stringMatching(/^store unavailable: .*(full|ENOSPC|SQLITE_FULL)/),
      since: expect.any(String),
    });
    const refused = await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'second' }) });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: string }).error).toMatch(/^store unavailable: /);
    await send(2);
    expect(((await (await api('/api/v1/usage')).json()) as { requests: number }[])[0]?.requests).toBe(sent);
    await sleep(2500); // at least one more failed flush
    expect(child.exitCode).toBeNull();

    fs.rmSync(filler);
    for (let i = 0; i < 100 && (await health()).status !== 'ok'; i++) await sleep(100);
    expect(await health()).toEqual({ status: 'ok' });
    expect((await api('/api/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'second' }) })).status).toBe(201);
    child.kill('SIGTERM');
    const code = await new Promise((r) => child!.once('exit', r));
    expect(code).toBe(0);
    const store = new SqliteStore(dataDir);
    expect((await store.loadUsage()).map((u) => [u.keyName, u.requests, u.errors])).toEqual([['app', sent, sent]]);
    await store.close();
    fs.rmSync(catalog);
    console.log(
      `tmpfs disk-full: ${sent} requests, ${sent} in the store after recovery; log said: ${out
        .split('\n')
        .filter((l) => l.startsWith('{') && l.includes('store'))
        .map((l) => (JSON.parse(l) as { msg: string }).msg)
        .join(' | ')}`,
    );
  });
});
