import { execFile } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';

/** The built ctl (turbo builds it before `test`), run as an operator runs it. */
const CLI = new URL('../dist/cli.js', import.meta.url).pathname;

function ctl(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent', ...env } }, (err, _out, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

// Only refusals are run here: each happens before ctl sends anything, and the .invalid
// name never resolves (RFC 2606), so a regression cannot send traffic anywhere.
describe('LLMGW_INSECURE_HTTP is read strictly', () => {
  it.each(['0', 'false', 'no', 'OFF'])('=%s keeps plain http to another machine refused (commander turned it on)', async (v) => {
    const r = await ctl({ LLMGW_INSECURE_HTTP: v }, 'nodes', '--server', 'http://nowhere.invalid:8081', '--token', 't');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('error: refusing plain http to nowhere.invalid:8081');
  });

  it('=maybe is a usage error naming the variable', async () => {
    const r = await ctl({ LLMGW_INSECURE_HTTP: 'maybe' }, 'nodes', '--server', 'http://nowhere.invalid:8081', '--token', 't');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('error: invalid LLMGW_INSECURE_HTTP="maybe"');
  });
});
