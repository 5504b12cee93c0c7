import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { readGgufHeader } from '@llmgw/gguf';
import type { GgufHeader } from '@llmgw/gguf';
import { availableCores, defaultThreads } from './cores.js';
import { HELP_TEXT, USAGE_EXIT_CODE, parseEngineArgs } from './options.js';
import type { NodeLlamaCppOptions } from './options.js';
import { LlamaRuntime } from './runtime.js';
import { createEngineServer } from './server.js';

export const LOG_PREFIX = 'node-llama-cpp-engine:';

/** The line tests and the agent's logs look for; kept in one place so the format can't drift. */
export function servingLine(model: string, host: string, port: number): string {
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return `${LOG_PREFIX} serving ${model} on http://${urlHost}:${port}`;
}

function out(line: string): void {
  process.stdout.write(`${LOG_PREFIX} ${line}\n`);
}

function err(line: string): void {
  process.stderr.write(`${LOG_PREFIX} ${line}\n`);
}

function fatal(line: string): never {
  err(`fatal: ${line}`);
  process.exit(1);
}

function vocabSize(header: GgufHeader): number | null {
  const tokens = header.metadata['tokenizer.ggml.tokens'];
  return typeof tokens === 'object' && !Array.isArray(tokens) ? tokens.length : null;
}

/** --threads as given, but never more than the cores: oversubscribed llama.cpp crawls. */
function chooseThreads(options: NodeLlamaCppOptions, header: GgufHeader): number {
  const cores = availableCores();
  if (options.threads === null) return defaultThreads(header.fileSizeBytes, cores);
  if (options.threads > cores) {
    err(`--threads ${options.threads} is more than the ${cores} cores this process may use; using ${cores}`);
    return cores;
  }
  return options.threads;
}

async function serve(options: NodeLlamaCppOptions): Promise<void> {
  let header: GgufHeader;
  try {
    header = await readGgufHeader(options.model);
  } catch (e) {
    fatal(`cannot load model ${options.model}: ${(e as Error).message}`);
  }
  const servedName = options.servedName ?? header.name ?? path.basename(options.model).replace(/\.gguf$/i, '');
  const threads = chooseThreads(options, header);

  const engine = createEngineServer({ servedName, apiKey: options.apiKey, vocabSize: vocabSize(header), log: out });
  const { server } = engine;
  const shutdown = (signal: string): void => {
    out(`${signal}, shutting down`);
    // In-flight streams would hold close() open; the process exit frees the model anyway.
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  server.on('error', (e: Error) => fatal(`cannot listen on ${options.host}:${options.port}: ${e.message}`));
  await new Promise<void>((resolve) => server.listen(options.port, options.host, resolve));
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${servingLine(servedName, options.host, port)}\n`);

  const started = performance.now();
  out(`loading ${options.model} (${header.architecture}, ${(header.parameterCount / 1e6).toFixed(2)}M parameters, ${threads} threads, ${options.parallel} parallel)`);
  let runtime: LlamaRuntime;
  try {
    runtime = await LlamaRuntime.load({ modelPath: options.model, threads, parallel: options.parallel, contextSize: options.contextSize, log: out });
  } catch (e) {
    fatal(`cannot load model ${options.model}: ${(e as Error).message}`);
  }
  engine.setBackend(runtime);
  out(`ready in ${((performance.now() - started) / 1000).toFixed(2)}s: context ${runtime.contextSize} tokens per sequence, embeddings ${runtime.embeddingLength ?? 'off'}`);
}

/** The `node-llama-cpp-engine` program: parses argv, then serves until SIGTERM. */
export async function runNodeLlamaCppEngine(argv: readonly string[]): Promise<void> {
  const parsed = parseEngineArgs(argv);
  if (parsed.kind === 'help') {
    process.stdout.write(HELP_TEXT);
    return;
  }
  if (parsed.kind === 'error') {
    err(`error: ${parsed.message} (see --help)`);
    process.exit(USAGE_EXIT_CODE);
  }
  await serve(parsed.options);
}
