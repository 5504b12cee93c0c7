import { execFile, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/** The built ctl (turbo builds it before `test`), run as an operator runs it. */
const CLI = new URL('../dist/cli.js', import.meta.url).pathname;

// A reply far larger than a pipe's buffer, so ctl is still writing when its reader leaves.
const rows = JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ key_name: `k-${i}`, model: 'm', requests: i })));
// A stand-in admin API: what each path answers.
const answers: Record<string, string> = {
  '/api/v1/usage': rows,
  '/api/v1/events?node=nosuch': JSON.stringify({ events: [], cursor: 0 }),
  '/api/v1/events?node=gone': JSON.stringify({ events: [], cursor: 0 }),
  '/api/v1/nodes': JSON.stringify([{ id: 'gone' }]),
};
const server = http.createServer((req, res) => {
  const body = answers[req.url ?? ''];
  res.statusCode = body === undefined ? 404 : 200;
  res.setHeader('content-type', 'application/json').end(body ?? JSON.stringify({ error: `no route ${req.url}`, code: 'not_found' }));
});
let url = '';

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('ctl piped into a reader that stops early (ctl usage | head -1)', () => {
  it('exits 0 without a word on stderr', async () => {
    const child = spawn(process.execPath, [CLI, 'usage', '-o', 'json', '--server', url, '--token', 't'], {
      env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // The first line read, the reader goes, as `head -1` does.
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

function ctl(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args, '--server', url, '--token', 't'],
      { env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent', NO_COLOR: '1' } },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

describe('ctl events --node', () => {
  it('refuses a node the server does not know and has no events about, as ctl files --node does', async () => {
    expect(await ctl('events', '--node', 'nosuch')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: no node "nosuch" and no events about it (see ctl nodes)\n',
    });
  });

  it('says No events. for a node it knows', async () => {
    expect(await ctl('events', '--node', 'gone')).toEqual({ code: 0, stdout: 'No events.\n', stderr: '' });
  });
});
