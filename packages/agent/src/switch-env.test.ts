import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/main.js');

function agent(env: Record<string, string>, stateDir: string): Promise<{ code: number; stderr: string }> {
  const args = [main, 'run', '--server', 'http://nowhere.invalid:8081', '--state-dir', stateDir, '--engine-user', os.userInfo().username];
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { PATH: process.env.PATH ?? '', LLMGW_JOIN_TOKEN: 'x', ...env } }, (err, _out, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

// Only refusals are run: each comes before the agent sends anything to --server, whose
// .invalid name never resolves (RFC 2606), so a regression cannot send traffic anywhere.
describe('boolean environment variables of llmgw-agent run', () => {
  it.each(['0', 'false', 'off'])('LLMGW_INSECURE_HTTP=%s leaves plain http to another machine refused', async (v) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-switch-'));
    const r = await agent({ LLMGW_INSECURE_HTTP: v }, path.join(dir, 'state'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('refusing plain http to nowhere.invalid:8081');
  });

  it.each(['LLMGW_INSECURE_HTTP', 'LLMGW_STOP_ENGINES_ON_EXIT', 'LLMGW_ALLOW_COMMAND_ENGINE'])('%s=maybe exits 2 naming the variable', async (name) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-switch-'));
    const r = await agent({ [name]: 'maybe' }, path.join(dir, 'state'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid ${name}="maybe"`);
    expect(fs.existsSync(path.join(dir, 'state'))).toBe(false);
  });
});
