import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { tempDirs } from '../test/temp-dirs.js';

/** The built server, run as an operator runs it (`pnpm test` builds first). */
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

const tmp = tempDirs('llmgw-main-', afterEach);

function server(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [MAIN, ...args],
      { env: { ...process.env, LLMGW_ADMIN_TOKEN: 'admin', LLMGW_JOIN_TOKEN: 'join' }, timeout: 15_000 },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

describe('llmgw-server with a mistyped command line', () => {
  it.each([
    [['--admin-addr', '9081'], "llmgw-server: --admin-addr must be HOST:PORT (e.g. 127.0.0.1:9081, or :PORT for every address), got '9081'"],
    [['--client-addr', 'localhost'], "llmgw-server: --client-addr must be HOST:PORT (e.g. 127.0.0.1:8080, or :PORT for every address), got 'localhost'"],
    [['--lost-after', 'abc'], "llmgw-server: --lost-after must be a number of seconds > 0, got 'abc'"],
    [['--insecure-http', '--tls-cert', 'c.pem'], 'llmgw-server: --insecure-http and --tls-cert/--tls-key contradict each other: give one or the other'],
    [['--client-tls-cert', 'c.pem'], 'llmgw-server: give both --client-tls-cert and --client-tls-key, or neither (the client listener then serves plain HTTP)'],
    [['--bogus'], "error: unknown option '--bogus'"],
    [['--lost-after'], "error: option '--lost-after <seconds>' argument missing"],
    [['--log-level', 'loud'], "error: option '--log-level <level>' argument 'loud' is invalid."],
  ])('%j: exits 2 with one line, and writes nothing', async (args, line) => {
    const dataDir = path.join(tmp(), 'data');
    const r = await server(['--data-dir', dataDir, ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toContain(line);
    expect(r.stdout).toBe('');
    expect(fs.existsSync(dataDir)).toBe(false);
  });

  it('help still exits 0', async () => {
    expect(await server(['--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('Usage: llmgw-server') });
  });

  it('a port in use says which flag or variable moves that listener', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const r = await server([
        '--data-dir',
        tmp(),
        '--admin-addr',
        `127.0.0.1:${port}`,
        '--client-addr',
        '127.0.0.1:0',
        '--insecure-http',
        '--log-level',
        'error',
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`^llmgw-server: cannot start: .*EADDRINUSE.*127\\.0\\.0\\.1:${port}.* give --admin-addr \\(LLMGW_ADMIN_ADDR\\) another port\\)\\n$`),
      );
    } finally {
      taken.close();
    }
  });
});
