import fs from 'node:fs';
import { parseArgs } from 'node:util';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Exit code for a bad command line, as most CLIs do. */
export const USAGE_EXIT_CODE = 2;

/**
 * The environment variable an llmgw engine reads its API key from when it has no
 * `--api-key-file` (a person starting one by hand, a `command` program). The agent hands
 * llmgw's own engines the key through `--api-key-file /dev/fd/3` instead: another
 * process of the same user can read a process's environment (`/proc/PID/environ`).
 */
export const ENGINE_API_KEY_ENV = 'LLMGW_ENGINE_API_KEY';

/** `/dev/fd/N` or `/proc/self/fd/N`: a descriptor the engine inherited, read as it is. */
const INHERITED_FD = /^\/(?:dev|proc\/self)\/fd\/(\d+)$/;

/**
 * The key in `file`, trimmed. A `/dev/fd/N` path is read from descriptor N itself and
 * closed: the agent opens a 0400 key file that the engine's user may not open (and
 * unlinks it), so re-opening the path would fail, and a closed descriptor leaves nothing
 * for another process to open through `/proc/PID/fd`.
 */
export function readKeyFile(file: string): string {
  const m = INHERITED_FD.exec(file);
  let text: string;
  try {
    if (m) {
      const fd = Number(m[1]);
      try {
        text = fs.readFileSync(fd, 'utf8');
      } finally {
        fs.closeSync(fd);
      }
    } else text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--api-key-file ${file}: ${(err as Error).message}`);
  }
  const key = text.trim();
  if (key === '') throw new UsageError(`--api-key-file ${file} is empty`);
  return key;
}

/**
 * The API key an engine requires: `--api-key` when given (for people who start an
 * engine by hand), else the contents of `--api-key-file`, else LLMGW_ENGINE_API_KEY,
 * else none. An empty value is none.
 */
export function apiKeyFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env, file?: string): string | null {
  if (flag === undefined && file !== undefined) return readKeyFile(file);
  const key = flag ?? env[ENGINE_API_KEY_ENV];
  return key === undefined || key === '' ? null : key;
}

/** A command line an engine cannot run; reported in one line. */
export class UsageError extends Error {}

export type ParseResult<T> = { kind: 'options'; options: T } | { kind: 'help' } | { kind: 'error'; message: string };

/** The `--name value` / `--name=value` flags of a command line; a flag given twice takes its last value. */
export class Flags {
  constructor(private readonly values: ReadonlyMap<string, string>) {}

  get(name: string): string | undefined {
    return this.values.get(name);
  }

  /** An integer flag in [min, max]; null when not given. */
  int(name: string, min: number, max: number): number | null {
    const raw = this.values.get(name);
    return raw === undefined ? null : intFlag(name, raw, min, max);
  }
}

export function intFlag(name: string, raw: string, min: number, max: number): number {
  // Number('') is 0 and Number('1e3') is 1000; only plain digits are meant here.
  if (!/^\d+$/.test(raw)) throw new UsageError(`--${name} needs an integer, got '${raw}'`);
  const value = Number(raw);
  if (value < min || value > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${raw}`);
  return value;
}

/**
 * An engine's argv (without node and the script) into its options: every flag takes a
 * value and must be one of `valueFlags`; `-h`/`--help` anywhere before an error asks for
 * help; `build` reads the flags and throws {@link UsageError} for what it refuses.
 * Never throws a UsageError itself.
 */
export function parseCommandLine<T>(argv: readonly string[], valueFlags: ReadonlySet<string>, build: (flags: Flags) => T): ParseResult<T> {
  const values = new Map<string, string>();
  try {
    for (const token of tokensOf(argv, valueFlags)) {
      if (token.kind === 'positional') throw new UsageError(`unexpected argument '${token.value}'`);
      // `--` ends the options for parseArgs; an engine has no positionals, so it is just not a flag.
      if (token.kind === 'option-terminator') throw new UsageError('unknown flag --');
      // What was typed: `-hx` is one token per letter, all of the same argument.
      const typed = argv[token.index] ?? '';
      if (typed === '-h' || typed === '--help') return { kind: 'help' };
      if (!typed.startsWith('--')) throw new UsageError(`unexpected argument '${typed}'`);
      if (!valueFlags.has(token.name)) throw new UsageError(`unknown flag --${token.name}`);
      if (token.value === undefined) throw new UsageError(`--${token.name} needs a value`);
      values.set(token.name, token.value);
    }
    return { kind: 'options', options: build(new Flags(values)) };
  } catch (e) {
    if (e instanceof UsageError) return { kind: 'error', message: e.message };
    throw e;
  }
}

/**
 * `argv` in node:util's tokens, in order. Not strict: strict parseArgs refuses a value
 * that starts with a dash (`--api-key -k`, `--port -1`), where `--name value` takes the
 * next argument whatever it looks like, and its errors are not the engines' one-line
 * vocabulary; the checks are made on the tokens instead.
 */
function tokensOf(argv: readonly string[], valueFlags: ReadonlySet<string>) {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = Object.fromEntries([...valueFlags].map((name) => [name, { type: 'string' }]));
  options.help = { type: 'boolean', short: 'h' };
  return parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true }).tokens;
}

/** An engine's lines on stdout and stderr, each after the program's name. */
export class EngineConsole {
  constructor(readonly program: string) {}

  out(line: string): void {
    process.stdout.write(`${this.program}: ${line}\n`);
  }

  err(line: string): void {
    process.stderr.write(`${this.program}: ${line}\n`);
  }

  /** The last line of an engine that cannot go on; the agent shows it as the failure. */
  fatal(line: string, code = 1): never {
    this.err(`fatal: ${line}`);
    process.exit(code);
  }

  /**
   * The parsed command line's options, or null once help is printed; a bad command line
   * ends the process with {@link USAGE_EXIT_CODE} and one line.
   */
  options<T>(parsed: ParseResult<T>, helpText: string): T | null {
    if (parsed.kind === 'help') {
      process.stdout.write(helpText);
      return null;
    }
    if (parsed.kind === 'error') {
      this.err(`error: ${parsed.message} (see --help)`);
      process.exit(USAGE_EXIT_CODE);
    }
    return parsed.options;
  }

  /** The line tests and the agent's logs look for; kept in one place so the format can't drift. */
  servingLine(model: string, host: string, port: number): string {
    const urlHost = host.includes(':') ? `[${host}]` : host;
    return `${this.program}: serving ${model} on http://${urlHost}:${port}`;
  }

  /**
   * SIGTERM and SIGINT end the process at once, loaded or not: in-flight streams would
   * hold close() open, and an engine owes them nothing once told to stop.
   */
  exitOnSignals(server: Server): void {
    const shutdown = (signal: string): void => {
      this.out(`${signal}, shutting down`);
      server.close();
      server.closeAllConnections();
      process.exit(0);
    };
    process.once('SIGTERM', () => shutdown('SIGTERM'));
    process.once('SIGINT', () => shutdown('SIGINT'));
  }

  /** Listens, then prints the serving line with the real port (for --port 0); a port that cannot be bound is fatal. */
  async listen(server: Server, model: string, host: string, port: number): Promise<void> {
    server.on('error', (e: Error) => this.fatal(`cannot listen on ${host}:${port}: ${e.message}`));
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    process.stdout.write(`${this.servingLine(model, host, (server.address() as AddressInfo).port)}\n`);
  }
}
