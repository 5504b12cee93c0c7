import { EngineConsole } from '@llmgw/engine-http';
import { CRASH_EXIT_CODE, HELP_TEXT, parseEngineArgs } from './options.js';
import type { EngineOptions } from './options.js';
import { createEngineServer } from './server.js';

const con: EngineConsole = new EngineConsole('llmgw-test-engine');

function serve(options: EngineOptions): void {
  const engine = createEngineServer(options, {
    log: (line) => con.out(line),
    onCrash: (n) =>
      con.fatal(`--crash-after ${options.crashAfter ?? ''} reached at inference request ${n}; exiting with code ${CRASH_EXIT_CODE}`, CRASH_EXIT_CODE),
  });
  const { server } = engine;
  const ready = (): void => {
    engine.markLoaded();
    con.out('ready');
  };
  con.exitOnSignals(server);
  const listen = (): Promise<void> => con.listen(server, options.model, options.host, options.port);

  if (options.loadDelayMs > 0) con.out(`loading ${options.model} for ${options.loadDelayMs}ms (load mode ${options.loadMode})`);
  if (options.loadMode === '503') {
    void listen().then(() => (options.loadDelayMs > 0 ? setTimeout(ready, options.loadDelayMs) : ready()));
  } else if (options.loadDelayMs > 0) {
    // Like vLLM: nothing is bound until the model is loaded, so probes get connection refused.
    setTimeout(() => void listen().then(ready), options.loadDelayMs);
  } else {
    void listen().then(ready);
  }
}

/** The `llmgw-test-engine` program: parses argv, then serves until SIGTERM (or its scripted exit). */
export function runTestEngineCli(argv: readonly string[]): void {
  const options = con.options(parseEngineArgs(argv), HELP_TEXT);
  if (options === null) return;
  if (options.exitImmediately !== null)
    con.fatal(`cannot load model ${options.model} (--exit-immediately ${options.exitImmediately})`, options.exitImmediately);
  serve(options);
}
