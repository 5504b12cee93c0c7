import { CommanderError, type Command } from 'commander';
import { exitCode } from './failure.js';

/**
 * What every command's help ends with: the exit codes of failure.ts, so a script's
 * author reads them where they look (`ctl drain --help`), not only in the README.
 */
export const EXIT_CODES_HELP = 'Exit codes: 0 done, 1 the server refused or the operation did not finish, 2 usage (nothing was sent), 3 server unreachable.';

/** The command as typed, e.g. `ctl nodes delete`. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** The second line of every usage error. */
export function usageHint(cmd: Command): string {
  return `run '${commandPath(cmd)} --help' for usage`;
}

/**
 * Commander's error text on one line: its "(Did you mean nodes?)" comes on a line of
 * its own, and a usage error is two lines at most (the error, then the hint).
 */
export function oneLine(text: string): string {
  return text
    .trim()
    .split(/\s*\n\s*/)
    .map((l) => l.replace(/^\(Did you mean/, '(did you mean'))
    .join(' ');
}

/** `cmd` and its subcommands, depth first. */
function* allCommands(cmd: Command): Generator<Command> {
  yield cmd;
  for (const c of cmd.commands) yield* allCommands(c);
}

/**
 * Makes commander's parse errors ctl's usage errors: two lines on stderr, then exit 2
 * (through `exitOverride`, so the caller maps the CommanderError with `commanderExit`).
 * A bare group (`ctl`, `ctl keys`) prints its help on stdout and exits 0, as kubectl
 * does. Every command's help ends with the exit codes. Call it once every command is
 * added.
 */
export function strictUsage(root: Command, out: (s: string) => void, err: (s: string) => void): void {
  for (const cmd of allCommands(root)) {
    cmd.exitOverride();
    cmd.configureOutput({
      writeOut: out,
      // Without an outputError in between, only help reaches writeErr: the help of a bare
      // group, which is an answer, not an error.
      writeErr: out,
      outputError: (text) => err(`${oneLine(text)}\n${usageHint(cmd)}\n`),
    });
    cmd.addHelpText('after', `\n${EXIT_CODES_HELP}`);
  }
}

/** The exit code for what commander threw: 0 after help or the version, 2 for any parse error. */
export function commanderExit(e: CommanderError): number {
  return ['commander.helpDisplayed', 'commander.help', 'commander.version'].includes(e.code) ? 0 : exitCode('usage');
}

/** The "Examples:" section of a command's help, for `cmd.addHelpText('after', …)`. */
export function examplesText(...lines: string[]): string {
  return `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}`;
}

/** Adds an "Examples:" section to a command's help. */
export function examples(cmd: Command, ...lines: string[]): Command {
  return cmd.addHelpText('after', examplesText(...lines));
}

export { CommanderError };
