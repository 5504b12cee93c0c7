import { UsageError, apiKeyFrom, intFlag, parseCommandLine } from '@llmgw/engine-http';
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
}

export type ParseResult = EngineParseResult<NodeLlamaCppOptions>;

export const HELP_TEXT = `Usage: node-llama-cpp-engine --model FILE.gguf --port PORT [options]

Serves a GGUF model with llama.cpp (prebuilt CPU build from node-llama-cpp) behind
OpenAI's API: GET /health, GET /v1/models, POST /v1/chat/completions,
POST /v1/completions, POST /v1/embeddings; GET /metrics in Prometheus text.

Required:
  --model FILE          GGUF file (for a split model, its first part)
  --port N              port to listen on; 0 picks a free one

Options:
  --served-name NAME    model name requests must use (default: general.name, else file name)
  --host HOST           address to bind (default 127.0.0.1)
  --api-key KEY         require "Authorization: Bearer KEY" on /v1/* (default: the
                        LLMGW_ENGINE_API_KEY variable, which keeps it out of ps)
  --api-key-file FILE   read the key from FILE (trimmed); /dev/fd/N reads descriptor N,
                        as the agent passes it (a 0400 file that only this engine holds)
  --threads N           llama.cpp threads (default: 1 per 256 MiB of weights, at least 1,
                        at most the cores this process may use; never more than cores)
  --parallel N          requests generated at once (default ${DEFAULT_PARALLEL}); more wait in a queue
  --context-size N      tokens of context per request (default ${DEFAULT_CONTEXT_SIZE}, or the model's if smaller)
  -h, --help            show this help

Each request takes the free sequence whose KV cache shares the longest prefix with its
prompt and evaluates only the rest; completions report the reused tokens as
usage.prompt_tokens_details.cached_tokens and send x-llmgw-prefix-cache-tokens
(--parallel x context size), the capacity of those caches.

A flag given twice takes its last value, so appended profile args override.
Stdout gets "node-llama-cpp-engine: serving NAME on http://HOST:PORT" once the port is
bound (the model may still be loading: /health answers 503 until it is ready).
`;

const VALUE_FLAGS = new Set(['model', 'served-name', 'host', 'port', 'api-key', 'api-key-file', 'threads', 'parallel', 'context-size']);

/** Parses the engine's argv (without node and the script); the key may also come from `env`. Never throws. */
export function parseEngineArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ParseResult {
  return parseCommandLine(argv, VALUE_FLAGS, (flags) => {
    const model = flags.get('model');
    if (model === undefined || model === '') throw new UsageError('--model is required');
    const port = flags.get('port');
    if (port === undefined) throw new UsageError('--port is required');
    const apiKey = flags.get('api-key');
    const servedName = flags.get('served-name');
    return {
      model,
      servedName: servedName === undefined || servedName === '' ? null : servedName,
      host: flags.get('host') ?? '127.0.0.1',
      port: intFlag('port', port, 0, 65535),
      apiKey: apiKeyFrom(apiKey, env, flags.get('api-key-file')),
      threads: flags.int('threads', 1, 1024),
      parallel: flags.int('parallel', 1, 256) ?? DEFAULT_PARALLEL,
      contextSize: flags.int('context-size', 16, 1 << 24),
    };
  });
}

/**
 * `--context-size` and `--parallel` from a profile's extra engine args (last one wins,
 * as in the engine), for sizing a memory estimate the way the engine will run. Anything
 * else, and values the engine would reject, are ignored: the engine reports those itself.
 */
export function sizingFromArgs(args: readonly string[]): { contextSize?: number; parallel?: number } {
  const out: { contextSize?: number; parallel?: number } = {};
  for (let i = 0; i < args.length; i++) {
    const m = /^--(context-size|parallel)(?:=(.*))?$/.exec(args[i] ?? '');
    if (m === null) continue;
    const raw = m[2] ?? args[++i];
    if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) < 1) continue;
    if (m[1] === 'parallel') out.parallel = Number(raw);
    else out.contextSize = Number(raw);
  }
  return out;
}
