import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { BAD_STORES } from './bad-files.js';
import { tempDirs } from '../../test/temp-dirs.js';

/** The built server, run as an operator runs it (`pnpm test` builds first). */
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

const tmp = tempDirs('llmgw-startup-', afterEach);

function start(dataDir: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [MAIN, '--data-dir', dataDir, '--client-addr', '127.0.0.1:0', '--admin-addr', '127.0.0.1:0', '--log-level', 'error'],
      { env: { ...process.env, LLMGW_ADMIN_TOKEN: 'admin', LLMGW_JOIN_TOKEN: 'join' } },
      (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
}

describe('llmgw-server refuses a store file that is not an intact llmgw store', () => {
  it.each(Object.entries(BAD_STORES))('%s: exits 2 with one line naming the file and what to do', async (_name, bad) => {
    const dir = tmp();
    await bad.write(dir);
    const { code, stderr } = await start(dir);
    expect(code).toBe(2);
    expect(stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(bad.says)]);
    expect(stderr).toContain(`llmgw-server: cannot start: store ${path.join(dir, 'llmgw.db')} `);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
