import os from 'node:os';
import path from 'node:path';
import type { Command, Option } from 'commander';
import {
  addSettings,
  envOf,
  measuredDefaults,
  measuredOf,
  readSettings,
  settingOption,
  type MeasuredOf,
  type SettingsOf,
  type SettingsTable,
} from '@llmgw/shared';
import { JOIN_APPROVALS } from './credentials/membership.js';
import { DEFAULT_QUEUE_SETTINGS } from './gateway/fair-queue.js';
import { DEFAULT_PREFIX_CACHE_TOKENS } from './gateway/prefix-index.js';
import { parseAddr, tlsFlagsProblem } from './tls/index.js';
import { DEFAULT_SATURATION } from './gateway/saturation.js';

const home = process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw');

/**
 * Every setting of `llmgw-server`, each declared here once: its name in {@link ServerConfig}
 * (seconds become `…Ms`), its flag (the variable is `LLMGW_` and the flag in capitals),
 * unit, default, bounds and help. The order is `--help`'s.
 */
export const SERVER_SETTINGS = {
  clientAddr: {
    unit: 'text',
    flag: '--client-addr',
    placeholder: 'host:port',
    default: '127.0.0.1:8080',
    help: 'client listener (OpenAI-compatible API, API keys)',
  },
  adminAddr: {
    unit: 'text',
    flag: '--admin-addr',
    placeholder: 'host:port',
    default: '127.0.0.1:8081',
    help: 'admin listener (admin API, dashboard, metrics, agent API)',
  },
  dataDir: {
    unit: 'text',
    flag: '--data-dir',
    placeholder: 'dir',
    default: path.join(home, 'server'),
    help: 'where the SQLite store and generated tokens live',
  },
  databaseUrl: {
    unit: 'text',
    flag: '--database-url',
    placeholder: 'url',
    help: 'postgres://USER@HOST:PORT/DB: share one PostgreSQL with other llmgw-server instances (one leads, all serve); default: SQLite in --data-dir',
  },
  instanceId: { unit: 'text', flag: '--instance-id', placeholder: 'id', help: "this instance's name among several on one database (ctl status)" },
  leaderLeaseMs: {
    unit: 'seconds',
    flag: '--leader-lease',
    default: 2,
    above: 0,
    help: "how long the leader's lease lasts unrenewed: a dead or paused leader is replaced after at most this (with --database-url)",
  },
  catalog: { unit: 'text', flag: '--catalog', placeholder: 'file', help: 'catalog YAML: which models to run (reloaded on SIGHUP and on change)' },
  notReadyAfterMs: {
    unit: 'seconds',
    flag: '--not-ready-after',
    default: 15,
    above: 0,
    help: 'a node silent this long is not-ready (no traffic, no placement)',
  },
  lostAfterMs: { unit: 'seconds', flag: '--lost-after', default: 300, above: 0, help: 'a node silent this long is lost (its replicas are replaced)' },
  engineProbeIntervalMs: {
    unit: 'seconds',
    flag: '--engine-probe-interval',
    default: 2,
    above: 0,
    help: 'how often the server probes the engines of a node silent past half --not-ready-after (GET /health with the engine key): one that answers keeps serving until --lost-after (at most a quarter of --not-ready-after)',
  },
  reconcileIntervalMs: {
    unit: 'seconds',
    flag: '--reconcile-interval',
    default: 5,
    above: 0,
    help: 'seconds between reconcile passes (changes also trigger one)',
  },
  failedBackoffMs: {
    unit: 'seconds',
    flag: '--failed-backoff',
    default: 30,
    above: 0,
    help: 'first wait before a failed replica is replaced (doubles per failure)',
  },
  maxBodyBytes: { unit: 'bytes', flag: '--max-body-size', default: 10 * 1024 * 1024, above: 0, help: 'largest client request body; larger ones get 413' },
  replyBufferBytes: {
    unit: 'bytes',
    flag: '--reply-buffer',
    default: 256 * 1024 * 1024,
    // At least one whole reply (64 MiB, DEFAULT_MAX_REPLY_BYTES): below it, every large reply
    // would get 503 "retry shortly" for ever, and clients that follow x-should-retry loop.
    atLeast: 64 * 1024 * 1024,
    help: 'bytes of non-streamed engine replies held in memory at once, all requests together (at least 64 MiB, the largest reply); a reply that does not fit gets 503 overloaded',
  },
  upstreamTimeoutMs: {
    unit: 'seconds',
    flag: '--upstream-timeout',
    default: 600,
    above: 0,
    help: "longest wait for an engine's response headers (a non-streamed reply has them only when done)",
  },
  cooldownMs: { unit: 'seconds', flag: '--cooldown', default: 5, above: 0, help: 'how long a replica that failed a request gets no traffic' },
  streamIdleTimeoutMs: {
    unit: 'seconds',
    flag: '--stream-idle-timeout',
    default: 60,
    above: 0,
    help: 'a stream whose engine sends nothing this long (after its headers) ends with an error event',
  },
  prefixCacheTokens: {
    unit: 'tokens',
    flag: '--prefix-cache-tokens',
    default: DEFAULT_PREFIX_CACHE_TOKENS,
    above: 0,
    help: "prefix cache capacity that cache-aware routing assumes for a replica whose engine does not say (llmgw's engines send x-llmgw-prefix-cache-tokens)",
  },
  saturationWaitMs: {
    unit: 'seconds',
    flag: '--saturation-wait',
    default: DEFAULT_SATURATION.maxWaitMs / 1000,
    atLeast: 0,
    help: 'flow control: a replica is saturated once the prefill queued on it would take longer than this; every replica of a model saturated, its requests wait in the gateway',
  },
  queueTtlMs: {
    unit: 'seconds',
    flag: '--queue-ttl',
    default: DEFAULT_QUEUE_SETTINGS.ttlMs / 1000,
    above: 0,
    help: 'flow control: longest a request waits in the gateway for a replica; then 429 (queue_timeout) with Retry-After',
  },
  queueMax: {
    unit: 'count',
    flag: '--queue-max',
    default: DEFAULT_QUEUE_SETTINGS.maxPerBand,
    above: 0,
    help: 'flow control: requests that may wait per model and priority band; beyond, 429 (queue_full) with Retry-After',
  },
  keepAliveMs: {
    unit: 'seconds',
    flag: '--keep-alive',
    default: 5,
    above: 0,
    help: 'interval of ": keep-alive" comments on a stream waiting for its first token',
  },
  drainParallel: { unit: 'count', flag: '--drain-parallel', default: 1, above: 0, help: 'replicas of one model replaced at a time when a node drains' },
  minHealthyMs: {
    unit: 'seconds',
    flag: '--min-healthy',
    default: 3,
    atLeast: 0,
    help: 'a replacement must be ready this long before the replica it replaces stops taking traffic',
  },
  drainTimeoutMs: { unit: 'seconds', flag: '--drain-timeout', default: 60, above: 0, help: "longest wait for a stepped-down replica's in-flight requests" },
  maxLostFraction: {
    unit: 'fraction',
    flag: '--max-lost-fraction',
    default: 0.5,
    above: 0,
    atMost: 1,
    help: 'above this share of nodes silent at once, their replicas are not replaced',
  },
  coldStartTimeoutMs: {
    unit: 'seconds',
    flag: '--cold-start-timeout',
    default: 300,
    above: 0,
    help: 'how long a request for a model scaled to zero waits for a replica',
  },
  headersTimeoutMs: {
    unit: 'seconds',
    flag: '--headers-timeout',
    default: 10,
    above: 0,
    help: "longest wait for a request's headers; the connection is then closed (both listeners)",
  },
  requestTimeoutMs: {
    unit: 'seconds',
    flag: '--request-timeout',
    default: 60,
    above: 0,
    help: 'longest wait for a whole request, headers and body, before a 408 and close (both listeners; long-polls and streams are responses, so not cut)',
  },
  // Longer than the 60 s idle timeout of common load balancers, so they close first.
  keepAliveTimeoutMs: {
    unit: 'seconds',
    flag: '--idle-timeout',
    default: 65,
    above: 0,
    help: 'how long a kept-alive connection may sit idle between requests (both listeners)',
  },
  maxConnections: {
    unit: 'count',
    flag: '--max-connections',
    default: 1024,
    above: 0,
    help: 'connections open at once per listener; more are closed as they arrive',
  },
  nodeMaxRequests: {
    unit: 'count',
    flag: '--node-max-requests',
    default: 16,
    above: 0,
    help: 'agent API requests of one node in flight at once (heartbeats, long-polls, file downloads); more get 429',
  },
  nodeMaxLongPolls: {
    unit: 'count',
    flag: '--node-max-long-polls',
    default: 2,
    above: 0,
    help: 'assignment long-polls of one node in flight at once (an agent holds one); more get 429',
  },
  joinRate: {
    unit: 'count',
    flag: '--join-rate',
    default: 60,
    above: 0,
    help: 'joins per minute the join token allows (a burst of as many, then one every 60/N s); more are refused with 429 and Retry-After',
  },
  tlsCert: {
    unit: 'text',
    flag: '--tls-cert',
    placeholder: 'file',
    help: "the admin listener's certificate (PEM, chain ending with its CA) instead of the generated one",
  },
  tlsKey: { unit: 'text', flag: '--tls-key', placeholder: 'file', help: 'the private key of --tls-cert (PEM)' },
  tlsSan: {
    unit: 'list',
    flag: '--tls-san',
    placeholder: 'name',
    commas: true,
    help: 'another name or address the generated certificate must carry (repeat, or comma-separate)',
  },
  insecureHttp: { unit: 'switch', flag: '--insecure-http', help: 'serve the admin listener as plain HTTP (only behind a proxy that terminates TLS)' },
  clientTlsCert: {
    unit: 'text',
    flag: '--client-tls-cert',
    placeholder: 'file',
    help: "the client listener's certificate (PEM); with --client-tls-key it serves HTTPS",
  },
  clientTlsKey: { unit: 'text', flag: '--client-tls-key', placeholder: 'file', help: 'the private key of --client-tls-cert (PEM)' },
  joinApproval: {
    unit: 'text',
    flag: '--join-approval',
    placeholder: 'mode',
    default: 'auto',
    choices: JOIN_APPROVALS,
    help: 'auto: a node that joins takes work at once; manual: it waits as pending-approval until ctl nodes approve',
  },
  modelsDir: {
    unit: 'text',
    flag: '--models-dir',
    placeholder: 'dir',
    help: 'serve the model files in this directory to agents (node credential, resumable) as llmgw://FILE sources',
  },
  allowLoopbackNodes: {
    unit: 'switch',
    flag: '--allow-loopback-nodes',
    help: 'take nodes whose mgmt_addr is loopback (127.0.0.1, ::1, localhost): a single-machine fleet, engines on this very machine',
  },
  bindCredentials: {
    unit: 'switch',
    flag: '--bind-credentials',
    help: 'refuse a node credential from a second address or hostname while the first is live (without it: an event and suspect in ctl nodes)',
  },
  logLevel: {
    unit: 'text',
    flag: '--log-level',
    placeholder: 'level',
    default: 'info',
    choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
    help: 'debug, info, warn or error (also trace, fatal, silent)',
  },
} as const satisfies SettingsTable;

type Table = typeof SERVER_SETTINGS;
/** A setting's name in {@link ServerConfig}. */
export type SettingName = keyof Table;

/** Every setting, validated: numbers within their bounds, seconds already in ms. */
export type ServerConfig = SettingsOf<Table>;

/** The measured settings, which `startServer` takes as they are. */
export type ServerTuning = MeasuredOf<Table>;

/** The option of one setting, e.g. for a subcommand that shares it; `help` replaces its text. */
export function settingOptionOf(cmd: Command, name: SettingName, help?: string): Option {
  return settingOption(cmd, SERVER_SETTINGS[name], help) as Option;
}

/** Adds every setting's option to `cmd`, in the table's order. */
export function addServerOptions(cmd: Command): Command {
  return addSettings(cmd, SERVER_SETTINGS);
}

/**
 * Every setting of a parsed `cmd` (see {@link addServerOptions}), validated; throws the
 * first refused one's message. Everything a command line can get wrong is refused here,
 * before `main` touches the data directory: addresses, and TLS flags that contradict.
 */
export function readServerSettings(cmd: Command, env: Record<string, string | undefined> = process.env): ServerConfig {
  const config = readSettings(cmd, SERVER_SETTINGS, env);
  for (const name of ['clientAddr', 'adminAddr'] as const) {
    const addr = config[name];
    try {
      parseAddr(addr);
    } catch {
      const from = cmd.getOptionValueSource(name) === 'env' ? envOf(SERVER_SETTINGS[name].flag) : SERVER_SETTINGS[name].flag;
      // `--admin-addr 9081`: a port alone, meant on this machine.
      const like = /^\d+$/.test(addr.trim()) ? `127.0.0.1:${addr.trim()}` : SERVER_SETTINGS[name].default;
      throw new Error(`${from} must be HOST:PORT (e.g. ${like}, or :PORT for every address), got '${addr}'`);
    }
  }
  const problem = tlsFlagsProblem(config);
  if (problem !== undefined) throw new Error(problem);
  return config;
}

/** The measured settings of `config`, which `startServer` takes as they are. */
export function tuningOf(config: ServerConfig): ServerTuning {
  return measuredOf(SERVER_SETTINGS, config);
}

/** Every measured setting at its default, in ms where the flag takes seconds (for in-process servers: tests). */
export function defaultTuning(): ServerTuning {
  return measuredDefaults(SERVER_SETTINGS);
}
