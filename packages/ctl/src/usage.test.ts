import { describe, expect, it } from '@jest/globals';
import { Command } from 'commander';
import { CommanderError, EXIT_CODES_HELP, commanderExit, oneLine, strictUsage } from './usage.js';

/** A small program shaped like ctl's, parsed as ctl parses: what reaches stdout, stderr and the exit code. */
function parse(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const program = new Command('ctl').option('-o, --output <format>', 'format');
  program
    .command('nodes')
    .action(() => undefined)
    .command('delete <node>')
    .action(() => undefined);
  program
    .command('keys')
    .command('list')
    .action(() => undefined);
  strictUsage(
    program,
    (t) => out.push(t),
    (t) => err.push(t),
  );
  let code = 0;
  try {
    program.parse(args, { from: 'user' });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    code = commanderExit(e);
  }
  return { code, out: out.join(''), err: err.join('') };
}

describe('usage errors', () => {
  it('are two lines on stderr, the second naming the help to read, and exit 2', () => {
    expect(parse(['nodez'])).toEqual({ code: 2, out: '', err: "error: unknown command 'nodez' (did you mean nodes?)\nrun 'ctl --help' for usage\n" });
    expect(parse(['nodes', '--bogus'])).toEqual({ code: 2, out: '', err: "error: unknown option '--bogus'\nrun 'ctl nodes --help' for usage\n" });
    expect(parse(['nodes', 'delete'])).toEqual({ code: 2, out: '', err: "error: missing required argument 'node'\nrun 'ctl nodes delete --help' for usage\n" });
    expect(parse(['keys', 'lst']).err).toBe("error: unknown command 'lst' (did you mean list?)\nrun 'ctl keys --help' for usage\n");
  });

  it('a bare group, --help and --version are answers on stdout with exit 0', () => {
    const bare = parse(['keys']);
    expect([bare.code, bare.err]).toEqual([0, '']);
    expect(bare.out).toMatch(/^Usage: ctl keys/);
    const help = parse(['nodes', 'delete', '--help']);
    expect(help.code).toBe(0);
    expect(help.out.trimEnd().endsWith(EXIT_CODES_HELP)).toBe(true);
  });

  it("joins commander's lines into one", () => {
    expect(oneLine("error: unknown command 'x'\n(Did you mean y?)\n")).toBe("error: unknown command 'x' (did you mean y?)");
  });
});
