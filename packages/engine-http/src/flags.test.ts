import { describe, expect, it } from '@jest/globals';
import { flagsHelp, lastFlagValue, parseFlags, refusedValues, type FlagTable } from './flags.js';

const table = {
  port: { type: 'int', flag: '--port', placeholder: 'N', min: 0, max: 65535, required: true, help: 'port to listen on' },
  apiKey: { type: 'text', flag: '--api-key', placeholder: 'KEY', help: 'the key' },
  host: { type: 'text', flag: '--host', placeholder: 'HOST', default: '127.0.0.1', nonEmpty: true, help: 'address to bind' },
  mode: { type: 'choice', flag: '--mode', placeholder: 'a|b', choices: ['a', 'b'], default: 'a', help: 'the mode' },
  tag: { type: 'text', flag: '--tag', placeholder: 'T', nonEmpty: true, repeatable: true, help: 'a tag, repeatable' },
  kind: { type: 'choice', flag: '--kind', placeholder: 'K', choices: ['x', 'y', 'z'], help: 'the kind', section: 'Faults:' },
  delay: {
    type: 'int',
    flag: '--delay',
    placeholder: 'MS',
    min: 1,
    max: 10,
    default: 2,
    help: 'a delay\nthat is long enough to wrap once the line is longer than the help column allows it',
  },
} satisfies FlagTable;
const parse = (argv: string[]) => parseFlags(argv, table);
const defaults = { port: 1, apiKey: null, host: '127.0.0.1', mode: 'a', tag: [] as string[], kind: null, delay: 2 };

describe('parseFlags', () => {
  it('takes --name value and --name=value, the last one winning, with defaults for the rest', () => {
    expect(parse(['--port', '1', '--port=2', '--api-key', 'k'])).toEqual({ kind: 'options', options: { ...defaults, port: 2, apiKey: 'k' } });
    expect(parse(['--port=1', '--kind', 'z', '--mode=b', '--delay', '10'])).toEqual({
      kind: 'options',
      options: { ...defaults, kind: 'z', mode: 'b', delay: 10 },
    });
  });

  it('keeps every value of a repeatable flag, in order, in both spellings', () => {
    expect(parse(['--port', '1', '--tag', 'a', '--tag=b', '--tag', 'a'])).toEqual({ kind: 'options', options: { ...defaults, tag: ['a', 'b', 'a'] } });
    expect(parse(['--port', '1', '--tag', 'a', '--tag='])).toEqual({ kind: 'error', message: '--tag must not be empty' });
  });

  it('takes the next argument as the value whatever it looks like', () => {
    expect(parse(['--port', '1', '--api-key', '-k'])).toMatchObject({ options: { apiKey: '-k' } });
    expect(parse(['--port', '1', '--api-key', '--port'])).toMatchObject({ options: { apiKey: '--port' } });
    expect(parse(['--port', '1', '--api-key', '-h'])).toMatchObject({ options: { apiKey: '-h' } });
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
    [[], '--port is required'],
    [['--port='], "--port needs an integer, got ''"],
    [['--port', '1', '--host', ''], '--host must not be empty'],
    [['--port', '1', '--mode', 'c'], "--mode must be 'a' or 'b', got 'c'"],
    [['--port', '1', '--kind', 'w'], "--kind must be one of x, y, z, got 'w'"],
    [['--port', '1', '--delay', '0'], '--delay must be between 1 and 10, got 0'],
    [['--port', '1', '--delay', '1e1'], "--delay needs an integer, got '1e1'"],
  ])('refuses %j in one line', (argv, message) => {
    expect(parse(argv)).toEqual({ kind: 'error', message });
  });
});

describe('flagsHelp', () => {
  const help = flagsHelp(table);

  it('lists every flag once, with its placeholder, default and section', () => {
    for (const f of Object.values(table)) expect(help.split(`  ${f.flag} ${f.placeholder} `)).toHaveLength(2);
    expect(help).toMatch(/^Required:\n {2}--port N +port to listen on\n\nOptions:\n/);
    expect(help).toContain('address to bind (default 127.0.0.1)');
    expect(help).toMatch(/\n\nFaults:\n {2}--kind K +the kind$/);
    expect(help).toMatch(/ {2}-h, --help +show this help\n\nFaults:/);
  });

  it('wraps long help under its column, and keeps lines within 88 characters', () => {
    const lines = help.split('\n');
    const i = lines.findIndex((l) => l.startsWith('  --delay MS'));
    expect(lines[i]).toMatch(/a delay \(default 2\)$/);
    expect(lines[i + 1]?.indexOf('that')).toBe(lines[i]?.indexOf('a delay'));
    expect(lines[i + 2]?.trimStart()).not.toBe('');
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(88);
  });
});

describe('lastFlagValue', () => {
  it('reads a flag out of someone else’s args as the engine would, ignoring what it would refuse', () => {
    expect(lastFlagValue(['--delay', '4', '--port', '2', '--delay=5'], table.delay)).toBe(5);
    expect(lastFlagValue(['--delay', '4', '--delay', 'lots'], table.delay)).toBeUndefined();
    expect(lastFlagValue(['--delay'], table.delay)).toBeUndefined();
    expect(lastFlagValue(['--delayed', '3'], table.delay)).toBeUndefined();
    expect(lastFlagValue([], table.delay)).toBeUndefined();
  });
});

describe('refusedValues', () => {
  it.each(Object.values(table))('are all refused by $flag, naming it', (f) => {
    for (const v of refusedValues(f))
      expect(parse(['--port', '1', `${f.flag}=${v}`])).toEqual({ kind: 'error', message: expect.stringMatching(new RegExp(`^${f.flag} `)) });
  });
});
