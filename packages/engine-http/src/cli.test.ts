import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ENGINE_API_KEY_ENV, UsageError, apiKeyFrom, readKeyFile } from './cli.js';

describe('the API key (issue 27, finding 7: keys in the environment were readable by every engine)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-key-'));
  const file = path.join(dir, 'k');
  fs.writeFileSync(file, 'from-file\n', { mode: 0o400 });

  it('is --api-key, else the file, else the variable, else none', () => {
    const env = { [ENGINE_API_KEY_ENV]: 'from-env' };
    expect(apiKeyFrom('flag', env, file)).toBe('flag');
    expect(apiKeyFrom(undefined, env, file)).toBe('from-file');
    expect(apiKeyFrom(undefined, env)).toBe('from-env');
    expect(apiKeyFrom(undefined, {})).toBeNull();
  });

  it('reads /dev/fd/N from the descriptor itself and closes it', () => {
    const fd = fs.openSync(file, 'r');
    expect(readKeyFile(`/dev/fd/${fd}`)).toBe('from-file');
    expect(() => fs.fstatSync(fd)).toThrow(/EBADF/);
  });

  it('refuses an empty or missing file in one line', () => {
    const empty = path.join(dir, 'empty');
    fs.writeFileSync(empty, '  \n');
    expect(() => readKeyFile(empty)).toThrow(UsageError);
    expect(() => readKeyFile(empty)).toThrow(`--api-key-file ${empty} is empty`);
    expect(() => readKeyFile(path.join(dir, 'missing'))).toThrow(/--api-key-file .*ENOENT/);
  });
});
