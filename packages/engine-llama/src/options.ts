import { USAGE_EXIT_CODE, flagsHelp, lastFlagValue, parseFlags, withApiKey, type FlagTable } from '@llmgw/engine-http';
import type { ParseResult as EngineParseResult } from '@llmgw/engine-http';
import { DEFAULT_CONTEXT_SIZE, DEFAULT_PARALLEL } from '@llmgw/gguf';

export { DEFAULT_CONTEXT_SIZE, DEFAULT_PARALLEL };

/** What the engine was asked to do, after parsing its command line. */
export interface NodeLlamaCppOptions {
  /** Path of the GGUF file (the first part of a split model). */
  model: string;
  /** Model name clients must use; default: the GGUF's `general.name`, else the file name. */
  servedName: string | null;
  host: string;
  port: number;
  /** When set, /v1/* need `Authorization: Bearer KEY`. */
  apiKey: string | null;
  /** llama.cpp threads; null = choose from the cores and the model size ({@link defaultThreads}). */
  threads: number | null;
  /** Requests generated at once, each with its own KV cache; more wait in a queue. */
  parallel: number;
  /** Tokens of context per request; null = {@link DEFAULT_CONTEXT_SIZE} or the model's, whichever is smaller. */
  contextSize: number | null;
  /** LoRA adapters served by name (`--lora NAME=PATH`), in the order given. */
  adapters: LoraAdapter[];
  /** Adapters held loaded at once; the least recently used is unloaded to load another. */
  maxLoras: number;
}

/** A LoRA adapter GGUF a request selects by naming it as its model. */
export interface LoraAdapter {
  name: string;
  path: string;
}

/** Adapters held loaded when `--max-loras` is not given: llmgw's default `max_loaded_adapters`. */
export const DEFAULT_MAX_LORAS = 8;

export type ParseResult = EngineParseResult<NodeLlamaCppOptions>;

/** Every flag of `node-llama-cpp-engine`, declared once; parsing, refusals and `--help` come from here. */
export const LLAMA_ENGINE_FLAGS = {
  model: { type: 'text', flag: '--model', placeholder: 'FILE', required: true, help: 'GGUF file (for a split model, its first part)' },
  port: { type: 'int', flag: '--port', placeholder: 'N', min: 0, max: 65535, required: true, help: 'port to listen on; 0 picks a free one' },
  servedName: {
    type: 'text',
    flag: '--served-name',
    placeholder: 'NAME',
    help: 'model name requests must use (default: general.name, else file name)',
  },
  host: { type: 'text', flag: '--host', placeholder: 'HOST', default: '127.0.0.1', nonEmpty: true, help: 'address to bind' },
  apiKey: {
    type: 'text',
    flag: '--api-key',
    placeholder: 'KEY',
    help: 'require "Authorization: Bearer KEY" on /v1/* (default: the LLMGW_ENGINE_API_KEY variable, which keeps it out of ps)',
  },
  apiKeyFile: {
    type: 'text',
    flag: '--api-key-file',
    placeholder: 'FILE',
    nonEmpty: true,
    help: 'read the key from FILE (trimmed); /dev/fd/N reads descriptor N, as the agent passes it (a 0400 file that only this engine holds)',
  },
  threads: {
    type: 'int',
    flag: '--threads',
    placeholder: 'N',
    min: 1,
    max: 1024,
    help: 'llama.cpp threads (default: 1 per 256 MiB of weights, at least 1, at most the cores this process may use; never more than cores)',
  },
  parallel: {
    type: 'int',
    flag: '--parallel',
    placeholder: 'N',
    min: 1,
    max: 256,
    default: DEFAULT_PARALLEL,
    help: 'requests generated at once; more wait in a queue',
  },
  contextSize: {
    type: 'int',
    flag: '--context-size',
    placeholder: 'N',
    min: 16,
    max: 1 << 24,
    help: `tokens of context per request (default ${DEFAULT_CONTEXT_SIZE}, or the model's if smaller)`,
  },
  lora: {
    type: 'text',
    flag: '--lora',
    placeholder: 'NAME=PATH',
    nonEmpty: true,
    repeatable: true,
    section: 'LoRA adapters:',
    help: 'a LoRA adapter GGUF served as model NAME, loaded on its first request; repeatable',
  },
  maxLoras: {
    type: 'int',
    flag: '--max-loras',
    placeholder: 'N',
    min: 1,
    max: 256,
    default: DEFAULT_MAX_LORAS,
    section: 'LoRA adapters:',
    help: 'adapters held loaded at once; loading another unloads the least recently used',
  },
} as const satisfies FlagTable;

export const HELP_TEXT = `Usage: node-llama-cpp-engine --model FILE.gguf --port PORT [options]

Serves a GGUF model with llama.cpp (prebuilt CPU build from node-llama-cpp) behind
OpenAI's API: GET /health, GET /v1/models, POST /v1/chat/completions,
POST /v1/completions, POST /v1/embeddings; GET /metrics in Prometheus text.

${flagsHelp(LLAMA_ENGINE_FLAGS)}

A request whose model is a --lora NAME is served by the base model with that adapter
applied (its own context, created on the adapter's first request); its reply names the
adapter. At most --max-loras are loaded; another unloads the least recently used.

Each request takes the free sequence whose KV cache shares the longest prefix with its
prompt and evaluates only the rest; completions report the reused tokens as
usage.prompt_tokens_details.cached_tokens and send x-llmgw-prefix-cache-tokens
(--parallel x context size), the capacity of those caches.

A flag given twice takes its last value, so appended profile args override.
Stdout gets "node-llama-cpp-engine: serving NAME on http://HOST:PORT" once the port is
bound (the model may still be loading: /health answers 503 until it is ready).
A bad command line exits with code ${USAGE_EXIT_CODE}.
`;

/** Parses the engine's argv (without node and the script); the key may also come from `env`. Never throws. */
export function parseEngineArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ParseResult {
  const parsed = parseFlags(argv, LLAMA_ENGINE_FLAGS);
  if (parsed.kind !== 'options') return parsed;
  const { servedName, lora, ...rest } = parsed.options;
  const adapters: LoraAdapter[] = [];
  for (const value of lora) {
    const at = value.indexOf('=');
    if (at <= 0 || at === value.length - 1) return { kind: 'error', message: `--lora must be NAME=PATH, got '${value}'` };
    const adapter = { name: value.slice(0, at), path: value.slice(at + 1) };
    if (adapters.some((a) => a.name === adapter.name)) return { kind: 'error', message: `--lora names ${adapter.name} twice` };
    if (adapter.name === servedName) return { kind: 'error', message: `--lora ${adapter.name} is the served name: name the adapter apart from its base` };
    adapters.push(adapter);
  }
  return withApiKey({ ...rest, servedName: servedName === '' ? null : servedName, adapters }, env);
}

/**
 * `--context-size` and `--parallel` from a profile's extra engine args (last one wins,
 * as in the engine), for sizing a memory estimate the way the engine will run. Anything
 * else, and values the engine would reject, are ignored: the engine reports those itself.
 */
export function sizingFromArgs(args: readonly string[]): { contextSize?: number; parallel?: number } {
  const contextSize = lastFlagValue(args, LLAMA_ENGINE_FLAGS.contextSize);
  const parallel = lastFlagValue(args, LLAMA_ENGINE_FLAGS.parallel);
  return { ...(typeof contextSize === 'number' ? { contextSize } : {}), ...(typeof parallel === 'number' ? { parallel } : {}) };
}
