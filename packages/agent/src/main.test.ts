import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { readGgufHeader } from '@llmgw/gguf';

const main = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/main.js');

function agent(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent' } }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

// Only refusals are run: none gets as far as a server.
describe('llmgw-agent with a mistyped command line', () => {
  it('names a mistyped command, with the one meant, where commander took it for an argument of run', async () => {
    expect(await agent('rn')).toEqual({
      code: 2,
      stdout: '',
      stderr: "llmgw-agent: unknown command 'rn' (did you mean run?); the commands are run, install-service, make-test-model, make-test-lora, help\n",
    });
    expect((await agent('make-test-modl', '--out', 'x')).stderr).toContain('(did you mean make-test-model?)');
    expect((await agent('frobnicate')).stderr).toBe(
      "llmgw-agent: unknown command 'frobnicate'; the commands are run, install-service, make-test-model, make-test-lora, help\n",
    );
  });

  it('exits 2 for an unknown option, as for every usage error, and 0 for help', async () => {
    expect(await agent('run', '--bogus')).toMatchObject({ code: 2, stderr: "error: unknown option '--bogus'\n" });
    expect(await agent('--bogus')).toMatchObject({ code: 2 });
    expect(await agent('--help')).toMatchObject({ code: 0, stdout: expect.stringContaining('Usage: llmgw-agent') });
  });
});

describe('llmgw-agent make-test-lora', () => {
  it('writes a LoRA GGUF adapter, the same bytes for the same seed, other bytes for another', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-make-lora-'));
    try {
      const [a, b, c] = ['a', 'b', 'c'].map((n) => path.join(dir, `${n}.gguf`));
      expect(await agent('make-test-lora', '--out', a!, '--seed', '5')).toMatchObject({ code: 0, stdout: expect.stringMatching(/ \d+ bytes\n$/) });
      await agent('make-test-lora', '--out', b!, '--seed', '5');
      await agent('make-test-lora', '--out', c!, '--seed', '6');
      expect((await readGgufHeader(a!)).metadata['general.type']).toBe('adapter');
      expect(fs.readFileSync(a!).equals(fs.readFileSync(b!))).toBe(true);
      expect(fs.readFileSync(a!).equals(fs.readFileSync(c!))).toBe(false);
      expect(await agent('make-test-lora', '--out', a!, '--seed', 'x')).toMatchObject({ code: 2, stderr: expect.stringContaining('invalid --seed "x"') });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
