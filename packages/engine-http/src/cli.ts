import fs from 'node:fs';
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

/**
 * Parsed options with the engine's key settled as {@link apiKeyFrom} says and
 * `apiKeyFile` gone; a key file that cannot be read is the command line's one-line error.
 */
export function withApiKey<T extends { apiKey?: string | null; apiKeyFile?: string | null }>(
  options: T,
  env: NodeJS.ProcessEnv,
): ParseResult<Omit<T, 'apiKey' | 'apiKeyFile'> & { apiKey: string | null }> {
  const { apiKey, apiKeyFile, ...rest } = options;
  try {
    return { kind: 'options', options: { ...rest, apiKey: apiKeyFrom(apiKey ?? undefined, env, apiKeyFile ?? undefined) } };
  } catch (err) {
    if (err instanceof UsageError) return { kind: 'error', message: err.message };
    throw err;
  }
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
