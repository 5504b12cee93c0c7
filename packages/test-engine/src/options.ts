import { USAGE_EXIT_CODE, UsageError, apiKeyFrom, intFlag, parseCommandLine } from '@llmgw/engine-http';
import type { ParseResult as EngineParseResult } from '@llmgw/engine-http';
import { FAULTS, type Fault } from './faults.js';

export type LoadMode = 'refuse' | '503';

export interface EngineOptions {
  host: string;
  port: number;
  model: string;
  apiKey: string | null;
  loadDelayMs: number;
  loadMode: LoadMode;
  tokenDelayMs: number;
  /** Inference requests served before the process exits with CRASH_EXIT_CODE; null = never. */
  crashAfter: number | null;
  failStatus: number | null;
  exitImmediately: number | null;
  maxTokensDefault: number;
  /** The fault mode: a kind of reply an engine must not be trusted on; null = none. */
  fault: Fault | null;
  /** Size of the one event (or reply field) `--fault oversized-event` sends. */
  faultBytes: number;
  /** Capacity of the simulated prefix cache in tokens; 0 = no cache. */
  prefixCacheTokens: number;
  /** Simulated prefill rate, uncached prompt tokens per second; 0 = instant. */
  prefillTokensPerS: number;
  /** Tokens per cache block: only whole blocks are cached, as in vLLM. */
  cacheBlockTokens: number;
}

/**
 * 65,536 tokens: 4,096 blocks of 16, the order of a small GPU engine's KV cache (a 7-8B
 * model on a 24 GB card holds tens of thousands of tokens), and few enough hashes that the
 * engine stays light. Benchmarks and tests size it to their workload.
 */
export const DEFAULT_PREFIX_CACHE_TOKENS = 65_536;
/** vLLM's default KV block size. */
export const DEFAULT_CACHE_BLOCK_TOKENS = 16;

export type ParseResult = EngineParseResult<EngineOptions>;

/** Exit code for --crash-after; distinct from 1 so tests can tell a planned crash from a bug. */
export const CRASH_EXIT_CODE = 3;

export const HELP_TEXT = `Usage: llmgw-test-engine --port PORT --model NAME [options]

A deterministic OpenAI-compatible engine for tests. Replies are "echo:" followed
by the words of the last user message; the same request always gets the same reply.
Requests may set min_tokens or ignore_eos (as vLLM does) for longer replies that repeat
the echo up to max_tokens / max_completion_tokens.

Required:
  --port N                 port to listen on; 0 picks a free one
  --model NAME             served model name; requests for any other name get 404

Options:
  --host HOST              address to bind (default 127.0.0.1)
  --api-key KEY            require "Authorization: Bearer KEY" on /v1/* (default: the
                           LLMGW_ENGINE_API_KEY variable, which keeps it out of ps)
  --api-key-file FILE      read the key from FILE (trimmed); /dev/fd/N reads descriptor N,
                           as the agent passes it (a 0400 file that only this engine holds)
  --load-delay-ms N        pretend loading the model takes N ms (default 0)
  --load-mode refuse|503   while loading: refuse = not listening yet (like vLLM, default);
                           503 = listening, /health and /v1/* answer 503 (like llama-server)
  --token-delay-ms N       ms per generated token: between streamed chunks, and
                           tokens x N before a non-streamed reply (default 0)
  --crash-after N          serve N inference requests (POST /v1/chat/completions,
                           /v1/completions, /v1/embeddings); when request N+1 arrives,
                           exit with code ${CRASH_EXIT_CODE} without answering it. Requests
                           refused with 401 or 503 (loading) do not count
  --fail-status S          answer every inference request with HTTP S (400-599)
                           and an OpenAI error body
  --exit-immediately CODE  print "fatal: cannot load model" to stderr and exit with CODE
  --max-tokens-default N   max_tokens when the request has none (default 16)
  --fault KIND             fault mode, for chat completions (streamed and not):
                           usage-negative|usage-string|usage-huge|usage-nonfinite:
                             usage counts of -1, "0abc", 1e20 or 1e999;
                           oversized-event: one content of --fault-bytes;
                           stall: headers (streamed) or nothing (not), then silence
                             until the client leaves;
                           garbage: malformed SSE before the tokens, or a 200 that
                             is not JSON
  --fault-bytes N          size for --fault oversized-event (default 4194304)

Simulated prefix cache (a stand-in for a GPU engine's, for routing tests and benchmarks):
  --prefix-cache-tokens N  capacity in tokens, an LRU of --cache-block-tokens blocks
                           keyed by chained hashes of the prompt (default ${DEFAULT_PREFIX_CACHE_TOKENS}; 0 = no
                           cache); sent as the x-llmgw-prefix-cache-tokens header on
                           completions, and usage.prompt_tokens_details.cached_tokens
                           says how much of each prompt was found there
  --prefill-tokens-per-s R simulated prefill: uncached prompt tokens / R seconds before
                           the first token, one prefill at a time, so time to first token
                           = queue wait + own prefill (default 0 = instant, no queue)
  --cache-block-tokens B   tokens per cache block; only whole blocks are cached
                           (default ${DEFAULT_CACHE_BLOCK_TOKENS})
  Tokens are words (split on whitespace) of the messages' contents, tagged with their
  message's role, or of the prompt; the reply's tokens are not cached.
  -h, --help               show this help

Stdout gets "llmgw-test-engine: serving MODEL on http://HOST:PORT" once the port is
bound (with the real port when --port 0), "llmgw-test-engine: ready" once loaded,
and one line per request. Unknown flags exit with code ${USAGE_EXIT_CODE}.
`;

const VALUE_FLAGS = new Set([
  'host',
  'port',
  'model',
  'api-key',
  'api-key-file',
  'load-delay-ms',
  'load-mode',
  'token-delay-ms',
  'crash-after',
  'fail-status',
  'exit-immediately',
  'max-tokens-default',
  'fault',
  'fault-bytes',
  'prefix-cache-tokens',
  'prefill-tokens-per-s',
  'cache-block-tokens',
]);

/** Parses the engine's argv; the key may also come from `env` (see `apiKeyFrom`). */
export function parseEngineArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ParseResult {
  return parseCommandLine(argv, VALUE_FLAGS, (flags) => {
    const port = flags.get('port');
    if (port === undefined) throw new UsageError('--port is required');
    const model = flags.get('model');
    if (model === undefined || model === '') throw new UsageError('--model is required');
    const loadMode = flags.get('load-mode') ?? 'refuse';
    if (loadMode !== 'refuse' && loadMode !== '503') {
      throw new UsageError(`--load-mode must be 'refuse' or '503', got '${loadMode}'`);
    }
    const apiKey = flags.get('api-key');
    if (apiKey === '') throw new UsageError('--api-key must not be empty');
    const fault = flags.get('fault') ?? null;
    if (fault !== null && !(FAULTS as readonly string[]).includes(fault)) throw new UsageError(`--fault must be one of ${FAULTS.join(', ')}, got '${fault}'`);
    const host = flags.get('host') ?? '127.0.0.1';
    if (host === '') throw new UsageError('--host must not be empty');
    return {
      host,
      port: intFlag('port', port, 0, 65535),
      model,
      apiKey: apiKeyFrom(apiKey, env, flags.get('api-key-file')),
      loadDelayMs: flags.int('load-delay-ms', 0, 2 ** 31 - 1) ?? 0,
      loadMode,
      tokenDelayMs: flags.int('token-delay-ms', 0, 2 ** 31 - 1) ?? 0,
      crashAfter: flags.int('crash-after', 0, Number.MAX_SAFE_INTEGER),
      failStatus: flags.int('fail-status', 400, 599),
      exitImmediately: flags.int('exit-immediately', 0, 255),
      maxTokensDefault: flags.int('max-tokens-default', 1, 1_000_000) ?? 16,
      fault: fault as Fault | null,
      faultBytes: flags.int('fault-bytes', 1, 2 ** 30) ?? 4 * 1024 * 1024,
      prefixCacheTokens: flags.int('prefix-cache-tokens', 0, 2 ** 31 - 1) ?? DEFAULT_PREFIX_CACHE_TOKENS,
      prefillTokensPerS: flags.int('prefill-tokens-per-s', 0, 2 ** 31 - 1) ?? 0,
      cacheBlockTokens: flags.int('cache-block-tokens', 1, 1 << 20) ?? DEFAULT_CACHE_BLOCK_TOKENS,
    };
  });
}
