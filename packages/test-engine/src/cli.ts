import type { AddressInfo } from 'node:net';
import { CRASH_EXIT_CODE, HELP_TEXT, USAGE_EXIT_CODE, parseEngineArgs } from './options.js';
import type { EngineOptions } from './options.js';
import { createEngineServer } from './server.js';

export const LOG_PREFIX = 'llmgw-test-engine:';

/** The line tests and the agent's logs look for; kept in one place so the format can't drift. */
export function servingLine(model: string, host: string, port: number): string {
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return `${LOG_PREFIX} serving ${model} on http://${urlHost}:${port}`;
}

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

function err(line: string): void {
  process.stderr.write(`${line}\n`);
}

function serve(options: EngineOptions): void {
  const engine = createEngineServer(options, {
    log: (line) => out(`${LOG_PREFIX} ${line}`),
    onCrash: (n) => {
      err(`${LOG_PREFIX} fatal: --crash-after ${options.crashAfter ?? ''} reached at inference request ${n}; exiting with code ${CRASH_EXIT_CODE}`);
      process.exit(CRASH_EXIT_CODE);
    },
  });
  const { server } = engine;

  const ready = (): void => {
    engine.markLoaded();
    out(`${LOG_PREFIX} ready`);
  };

  const shutdown = (signal: string): void => {
    out(`${LOG_PREFIX} ${signal}, shutting down`);
    // Keep-alive and streaming sockets would hold close() open; a test engine owes them nothing.
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));

  server.on('error', (e: Error) => {
    err(`${LOG_PREFIX} fatal: cannot listen on ${options.host}:${options.port}: ${e.message}`);
    process.exit(1);
  });

  const listen = (onListening: () => void): void => {
    server.listen(options.port, options.host, () => {
      const { port } = server.address() as AddressInfo;
      out(servingLine(options.model, options.host, port));
      onListening();
    });
  };

  if (options.loadDelayMs > 0) {
    out(`${LOG_PREFIX} loading ${options.model} for ${options.loadDelayMs}ms (load mode ${options.loadMode})`);
  }
  if (options.loadMode === '503') {
    listen(() => (options.loadDelayMs > 0 ? setTimeout(ready, options.loadDelayMs) : ready()));
  } else if (options.loadDelayMs > 0) {
    // Like vLLM: nothing is bound until the model is loaded, so probes get connection refused.
    setTimeout(() => listen(ready), options.loadDelayMs);
  } else {
    listen(ready);
  }
}

export function runTestEngineCli(argv: readonly string[]): void {
  const parsed = parseEngineArgs(argv);
  if (parsed.kind === 'help') {
    process.stdout.write(HELP_TEXT);
    return;
  }
  if (parsed.kind === 'error') {
    err(`${LOG_PREFIX} error: ${parsed.message} (see --help)`);
    process.exit(USAGE_EXIT_CODE);
  }
  const { options } = parsed;
  if (options.exitImmediately !== null) {
    err(`${LOG_PREFIX} fatal: cannot load model ${options.model} (--exit-immediately ${options.exitImmediately})`);
    process.exit(options.exitImmediately);
  }
  serve(options);
}
