import { USAGE_EXIT_CODE, flagsHelp, parseFlags, withApiKey, type FlagTable } from '@llmgw/engine-http';
import type { ParseResult as EngineParseResult } from '@llmgw/engine-http';
import { parseLoras, repeatedValues, type LoraAdapter } from './adapters.js';
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
  /** LoRA adapters served under their own names (`--lora`, repeatable); empty = none. */
  loras: LoraAdapter[];
  /** Adapter slots: at most this many loaded at once, the least recently used evicted. */
  maxLoras: number;
  /** Simulated time to load an adapter not in a slot, in ms. */
  loraLoadMs: number;
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

const LORA = 'LoRA adapters (simulated: a reply names the adapter that served it):';
const CACHE = "Simulated prefix cache (a stand-in for a GPU engine's, for routing tests and benchmarks):";

/** Every flag of `llmgw-test-engine`, declared once; parsing, refusals and `--help` come from here. */
export const TEST_ENGINE_FLAGS = {
  port: { type: 'int', flag: '--port', placeholder: 'N', min: 0, max: 65535, required: true, help: 'port to listen on; 0 picks a free one' },
  model: { type: 'text', flag: '--model', placeholder: 'NAME', required: true, help: 'served model name; requests for any other name get 404' },
  host: { type: 'text', flag: '--host', placeholder: 'HOST', default: '127.0.0.1', nonEmpty: true, help: 'address to bind' },
  apiKey: {
    type: 'text',
    flag: '--api-key',
    placeholder: 'KEY',
    nonEmpty: true,
    help: 'require "Authorization: Bearer KEY" on /v1/* (default: the LLMGW_ENGINE_API_KEY variable, which keeps it out of ps)',
  },
  apiKeyFile: {
    type: 'text',
    flag: '--api-key-file',
    placeholder: 'FILE',
    nonEmpty: true,
    help: 'read the key from FILE (trimmed); /dev/fd/N reads descriptor N, as the agent passes it (a 0400 file that only this engine holds)',
  },
  loadDelayMs: { type: 'int', flag: '--load-delay-ms', placeholder: 'N', min: 0, max: 2 ** 31 - 1, default: 0, help: 'pretend loading the model takes N ms' },
  loadMode: {
    type: 'choice',
    flag: '--load-mode',
    placeholder: 'refuse|503',
    choices: ['refuse', '503'],
    default: 'refuse',
    help: 'while loading: refuse = not listening yet (like vLLM); 503 = listening, /health and /v1/* answer 503 (like llama-server)',
  },
  tokenDelayMs: {
    type: 'int',
    flag: '--token-delay-ms',
    placeholder: 'N',
    min: 0,
    max: 2 ** 31 - 1,
    default: 0,
    help: 'ms per generated token: between streamed chunks, and tokens x N before a non-streamed reply',
  },
  crashAfter: {
    type: 'int',
    flag: '--crash-after',
    placeholder: 'N',
    min: 0,
    max: Number.MAX_SAFE_INTEGER,
    help: `serve N inference requests (POST /v1/chat/completions, /v1/completions, /v1/embeddings); when request N+1 arrives, exit with code ${CRASH_EXIT_CODE} without answering it. Requests refused with 401 or 503 (loading) do not count`,
  },
  failStatus: {
    type: 'int',
    flag: '--fail-status',
    placeholder: 'S',
    min: 400,
    max: 599,
    help: 'answer every inference request with HTTP S and an OpenAI error body',
  },
  exitImmediately: {
    type: 'int',
    flag: '--exit-immediately',
    placeholder: 'CODE',
    min: 0,
    max: 255,
    help: 'print "fatal: cannot load model" to stderr and exit with CODE',
  },
  maxTokensDefault: {
    type: 'int',
    flag: '--max-tokens-default',
    placeholder: 'N',
    min: 1,
    max: 1_000_000,
    default: 16,
    help: 'max_tokens when the request has none',
  },
  fault: {
    type: 'choice',
    flag: '--fault',
    placeholder: 'KIND',
    choices: FAULTS,
    help: [
      'fault mode, for chat completions (streamed and not):',
      '  usage-negative|usage-string|usage-huge|usage-nonfinite: usage counts of -1, "0abc", 1e20 or 1e999;',
      '  oversized-event: one content of --fault-bytes;',
      '  stall: headers (streamed) or nothing (not), then silence until the client leaves;',
      '  garbage: malformed SSE before the tokens, or a 200 that is not JSON',
    ].join('\n'),
  },
  faultBytes: {
    type: 'int',
    flag: '--fault-bytes',
    placeholder: 'N',
    min: 1,
    max: 2 ** 30,
    default: 4 * 1024 * 1024,
    help: 'size for --fault oversized-event',
  },
  prefixCacheTokens: {
    type: 'int',
    flag: '--prefix-cache-tokens',
    placeholder: 'N',
    min: 0,
    max: 2 ** 31 - 1,
    default: DEFAULT_PREFIX_CACHE_TOKENS,
    section: CACHE,
    help: 'capacity in tokens (0 = no cache), an LRU of --cache-block-tokens blocks keyed by chained hashes of the prompt; sent as the x-llmgw-prefix-cache-tokens header on completions, and usage.prompt_tokens_details.cached_tokens says how much of each prompt was found there',
  },
  prefillTokensPerS: {
    type: 'int',
    flag: '--prefill-tokens-per-s',
    placeholder: 'R',
    min: 0,
    max: 2 ** 31 - 1,
    default: 0,
    section: CACHE,
    help: 'simulated prefill (0 = instant, no queue): uncached prompt tokens / R seconds before the first token, one prefill at a time, so time to first token = queue wait + own prefill',
  },
  cacheBlockTokens: {
    type: 'int',
    flag: '--cache-block-tokens',
    placeholder: 'B',
    min: 1,
    max: 1 << 20,
    default: DEFAULT_CACHE_BLOCK_TOKENS,
    section: CACHE,
    help: 'tokens per cache block; only whole blocks are cached',
  },
  lora: {
    type: 'text',
    flag: '--lora',
    placeholder: 'NAME=PATH',
    nonEmpty: true,
    section: LORA,
    help: 'serve a LoRA adapter as model NAME (PATH is only named, never read); repeatable, and one value may list several comma-joined, as the agent\'s {adapters} gives them. A request for NAME is answered with "model": NAME and a reply starting "echo(NAME):"; a name that is neither the model nor an adapter gets 404',
  },
  maxLoras: {
    type: 'int',
    flag: '--max-loras',
    placeholder: 'N',
    min: 1,
    max: 256,
    default: 8,
    section: LORA,
    help: 'adapter slots: at most N adapters loaded at once; loading another evicts the least recently used',
  },
  loraLoadMs: {
    type: 'int',
    flag: '--lora-load-ms',
    placeholder: 'MS',
    min: 0,
    max: 2 ** 31 - 1,
    default: 0,
    section: LORA,
    help: "simulated time to load an adapter that is not in a slot, before its request's prefill; requests that come meanwhile wait for the same load. /metrics counts loads and evictions per adapter",
  },
} as const satisfies FlagTable;

export const HELP_TEXT = `Usage: llmgw-test-engine --port PORT --model NAME [options]

A deterministic OpenAI-compatible engine for tests. Replies are "echo:" followed
by the words of the last user message; the same request always gets the same reply.
Requests may set min_tokens or ignore_eos (as vLLM does) for longer replies that repeat
the echo up to max_tokens / max_completion_tokens.

${flagsHelp(TEST_ENGINE_FLAGS)}

Prefix cache tokens are words (split on whitespace) of the messages' contents, tagged
with their message's role, or of the prompt; the reply's tokens are not cached.

Stdout gets "llmgw-test-engine: serving MODEL on http://HOST:PORT" once the port is
bound (with the real port when --port 0), "llmgw-test-engine: ready" once loaded,
and one line per request. A bad command line exits with code ${USAGE_EXIT_CODE}.
`;

/** Parses the engine's argv; the key may also come from `env` (see `apiKeyFrom`). */
export function parseEngineArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ParseResult {
  const parsed = parseFlags(argv, TEST_ENGINE_FLAGS);
  if (parsed.kind !== 'options') return parsed;
  // --lora is the one flag given more than once (the table's parser keeps the last value).
  const { lora: _last, ...rest } = parsed.options;
  let loras: LoraAdapter[];
  try {
    loras = parseLoras(repeatedValues(argv, TEST_ENGINE_FLAGS.lora.flag), rest.model);
  } catch (e) {
    return { kind: 'error', message: (e as Error).message };
  }
  return withApiKey({ ...rest, loras }, env);
}
