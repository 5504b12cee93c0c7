import { describe, expect, it } from '@jest/globals';
import { parseCommandLine } from './cli.js';

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
