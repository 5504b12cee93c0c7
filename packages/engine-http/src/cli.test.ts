import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ENGINE_API_KEY_ENV, UsageError, apiKeyFrom, parseCommandLine, readKeyFile } from './cli.js';

const flags = new Set(['port', 'api-key']);
const parse = (argv: string[]) => parseCommandLine(argv, flags, (f) => ({ port: f.int('port', 0, 65535), apiKey: f.get('api-key') ?? null }));

describe('parseCommandLine', () => {
  it('takes --name value and --name=value, the last one winning', () => {
    expect(parse(['--port', '1', '--port=2', '--api-key', 'k'])).toEqual({ kind: 'options', options: { port: 2, apiKey: 'k' } });
  });

  it('takes the next argument as the value whatever it looks like', () => {
    expect(parse(['--api-key', '-k'])).toEqual({ kind: 'options', options: { port: null, apiKey: '-k' } });
    expect(parse(['--api-key', '--port'])).toEqual({ kind: 'options', options: { port: null, apiKey: '--port' } });
    expect(parse(['--api-key', '-h'])).toEqual({ kind: 'options', options: { port: null, apiKey: '-h' } });
  });

  it('asks for help at -h or --help before any error, and not after one', () => {
    expect(parse(['-h', '--bogus'])).toEqual({ kind: 'help' });
    expect(parse(['--port', 'x', '--help'])).toEqual({ kind: 'help' });
    expect(parse(['--bogus', '--help'])).toEqual({ kind: 'error', message: 'unknown flag --bogus' });
  });

  it.each([
    [['stray'], "unexpected argument 'stray'"],
    [['-hx'], "unexpected argument '-hx'"],
    [['-p', '1'], "unexpected argument '-p'"],
    [['--'], 'unknown flag --'],
    [['--help=yes'], 'unknown flag --help'],
    [['--bogus=1'], 'unknown flag --bogus'],
    [['--port'], '--port needs a value'],
    [['--port='], "--port needs an integer, got ''"],
  ])('refuses %j in one line', (argv, message) => {
    expect(parse(argv)).toEqual({ kind: 'error', message });
  });
});

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
