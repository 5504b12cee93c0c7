import path from 'node:path';
import { EngineConsole } from '@llmgw/engine-http';
import { readGgufHeader } from '@llmgw/gguf';
import type { GgufHeader } from '@llmgw/gguf';
import { availableCores, defaultThreads } from './cores.js';
import { HELP_TEXT, parseEngineArgs } from './options.js';
import type { NodeLlamaCppOptions } from './options.js';
import { LlamaRuntime } from './runtime.js';
import { createEngineServer } from './server.js';

const con: EngineConsole = new EngineConsole('node-llama-cpp-engine');

function vocabSize(header: GgufHeader): number | null {
  const tokens = header.metadata['tokenizer.ggml.tokens'];
  return typeof tokens === 'object' && !Array.isArray(tokens) ? tokens.length : null;
}

/** --threads as given, but never more than the cores: oversubscribed llama.cpp crawls. */
function chooseThreads(options: NodeLlamaCppOptions, header: GgufHeader): number {
  const cores = availableCores();
  if (options.threads === null) return defaultThreads(header.fileSizeBytes, cores);
  if (options.threads > cores) {
    con.err(`--threads ${options.threads} is more than the ${cores} cores this process may use; using ${cores}`);
    return cores;
  }
  return options.threads;
}

/**
 * Each `--lora` file is a LoRA GGUF adapter and its name is not the served name, checked
 * before serving: a wrong path is fatal now, naming it, not a 500 on the adapter's first request.
 */
async function checkAdapters(options: NodeLlamaCppOptions, servedName: string): Promise<void> {
  for (const a of options.adapters) {
    if (a.name === servedName) con.fatal(`--lora ${a.name} is the served name: name the adapter apart from its base`);
    let header: GgufHeader;
    try {
      header = await readGgufHeader(a.path);
    } catch (e) {
      con.fatal(`cannot load LoRA adapter ${a.name} from ${a.path}: ${(e as Error).message}`);
    }
    const type = header.metadata['general.type'];
    if (type !== 'adapter')
      con.fatal(`cannot load LoRA adapter ${a.name}: ${a.path} is not a LoRA GGUF (general.type ${JSON.stringify(type ?? null)}, not "adapter")`);
  }
}

async function serve(options: NodeLlamaCppOptions): Promise<void> {
  let header: GgufHeader;
  try {
    header = await readGgufHeader(options.model);
  } catch (e) {
    con.fatal(`cannot load model ${options.model}: ${(e as Error).message}`);
  }
  const servedName = options.servedName ?? header.name ?? path.basename(options.model).replace(/\.gguf$/i, '');
  const threads = chooseThreads(options, header);
  await checkAdapters(options, servedName);

  const engine = createEngineServer({ servedName, apiKey: options.apiKey, vocabSize: vocabSize(header), log: (line) => con.out(line) });
  // The process exit frees the model, so a signal needs no unloading first.
  con.exitOnSignals(engine.server);
  await con.listen(engine.server, servedName, options.host, options.port);

  const started = performance.now();
  con.out(
    `loading ${options.model} (${header.architecture}, ${(header.parameterCount / 1e6).toFixed(2)}M parameters, ${threads} threads, ${options.parallel} parallel)`,
  );
  let runtime: LlamaRuntime;
  try {
    runtime = await LlamaRuntime.load({
      modelPath: options.model,
      threads,
      parallel: options.parallel,
      contextSize: options.contextSize,
      adapters: options.adapters,
      maxLoras: options.maxLoras,
      log: (line) => con.out(line),
    });
  } catch (e) {
    con.fatal(`cannot load model ${options.model}: ${(e as Error).message}`);
  }
  engine.setBackend(runtime);
  con.out(
    `ready in ${((performance.now() - started) / 1000).toFixed(2)}s: context ${runtime.contextSize} tokens per sequence, embeddings ${runtime.embeddingLength ?? 'off'}` +
      (options.adapters.length ? `, ${options.adapters.length} LoRA adapters (at most ${options.maxLoras} loaded)` : ''),
  );
}

/** The `node-llama-cpp-engine` program: parses argv, then serves until SIGTERM. */
export async function runNodeLlamaCppEngine(argv: readonly string[]): Promise<void> {
  const options = con.options(parseEngineArgs(argv), HELP_TEXT);
  if (options !== null) await serve(options);
}
