import os from 'node:os';
import path from 'node:path';
import { Command, Option } from 'commander';
import { flagOrEnv } from '@llmgw/shared';
import { JOIN_APPROVALS } from './credentials/membership.js';
import { DEFAULT_PREFIX_CACHE_TOKENS } from './gateway/prefix-index.js';
import { collectSans } from './tls/index.js';

/**
 * What a measured setting's value is in, on the command line: it names the flag's
 * placeholder in `--help`, the message of a refused value, and (seconds) the conversion
 * to the milliseconds the server runs on.
 */
export type Unit = 'seconds' | 'count' | 'bytes' | 'tokens' | 'fraction';

/** A number with a unit and bounds; the server gets it in ms when the unit is seconds. */
interface Measured {
  unit: Unit;
  flag: `--${string}`;
  /** In the unit of the flag (seconds, not ms). */
  default: number;
  /** The value must be greater than this; for seconds that may be 0 only where 0 means "not at all". */
  above?: number;
  atLeast?: number;
  atMost?: number;
  help: string;
}

/** A string taken as given (an address, a path, a URL), or one of `choices`. */
interface Text {
  unit: 'text';
  flag: `--${string}`;
  placeholder: string;
  default?: string;
  choices?: readonly string[];
  help: string;
}

/** On when the flag is given, else as its variable says (strictly: see `parseSwitch`). */
interface Switch {
  unit: 'switch';
  flag: `--${string}`;
  help: string;
}

/** Names, repeated or comma-separated, from the flag and the variable together. */
interface Names {
  unit: 'names';
  flag: `--${string}`;
  placeholder: string;
  help: string;
}

type Setting = Measured | Text | Switch | Names;

const home = process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw');

/**
 * Every setting of `llmgw-server`, each declared here once: its name in {@link ServerConfig}
 * (seconds become `…Ms`), its flag (the variable is `LLMGW_` and the flag in capitals),
 * unit, default, bounds and help. The order is `--help`'s.
 */
export const SERVER_SETTINGS = {
  clientAddr: { unit: 'text', flag: '--client-addr', placeholder: 'host:port', default: '127.0.0.1:8080', help: 'client listener (OpenAI-compatible API, API keys)' },
  adminAddr: { unit: 'text', flag: '--admin-addr', placeholder: 'host:port', default: '127.0.0.1:8081', help: 'admin listener (admin API, dashboard, metrics, agent API)' },
  dataDir: { unit: 'text', flag: '--data-dir', placeholder: 'dir', default: path.join(home, 'server'), help: 'where the SQLite store and generated tokens live' },
  databaseUrl: { unit: 'text', flag: '--database-url', placeholder: 'url', help: 'postgres://USER@HOST:PORT/DB: share one PostgreSQL with other llmgw-server instances (one leads, all serve); default: SQLite in --data-dir' },
  instanceId: { unit: 'text', flag: '--instance-id', placeholder: 'id', help: "this instance's name among several on one database (ctl status)" },
  leaderLeaseMs: { unit: 'seconds', flag: '--leader-lease', default: 2, above: 0, help: "how long the leader's lease lasts unrenewed: a dead or paused leader is replaced after at most this (with --database-url)" },
  catalog: { unit: 'text', flag: '--catalog', placeholder: 'file', help: 'catalog YAML: which models to run (reloaded on SIGHUP and on change)' },
  notReadyAfterMs: { unit: 'seconds', flag: '--not-ready-after', default: 15, above: 0, help: 'a node silent this long is not-ready (no traffic, no placement)' },
  lostAfterMs: { unit: 'seconds', flag: '--lost-after', default: 300, above: 0, help: 'a node silent this long is lost (its replicas are replaced)' },
  reconcileIntervalMs: { unit: 'seconds', flag: '--reconcile-interval', default: 5, above: 0, help: 'seconds between reconcile passes (changes also trigger one)' },
  failedBackoffMs: { unit: 'seconds', flag: '--failed-backoff', default: 30, above: 0, help: 'first wait before a failed replica is replaced (doubles per failure)' },
  maxBodyBytes: { unit: 'bytes', flag: '--max-body-size', default: 10 * 1024 * 1024, above: 0, help: 'largest client request body; larger ones get 413' },
  upstreamTimeoutMs: { unit: 'seconds', flag: '--upstream-timeout', default: 600, above: 0, help: "longest wait for an engine's response headers (a non-streamed reply has them only when done)" },
  cooldownMs: { unit: 'seconds', flag: '--cooldown', default: 5, above: 0, help: 'how long a replica that failed a request gets no traffic' },
  streamIdleTimeoutMs: { unit: 'seconds', flag: '--stream-idle-timeout', default: 60, above: 0, help: 'a stream whose engine sends nothing this long (after its headers) ends with an error event' },
  prefixCacheTokens: {
    unit: 'tokens',
    flag: '--prefix-cache-tokens',
    default: DEFAULT_PREFIX_CACHE_TOKENS,
    above: 0,
    help: "prefix cache capacity that cache-aware routing assumes for a replica whose engine does not say (llmgw's engines send x-llmgw-prefix-cache-tokens)",
  },
  keepAliveMs: { unit: 'seconds', flag: '--keep-alive', default: 5, above: 0, help: 'interval of ": keep-alive" comments on a stream waiting for its first token' },
  drainParallel: { unit: 'count', flag: '--drain-parallel', default: 1, above: 0, help: 'replicas of one model replaced at a time when a node drains' },
  minHealthyMs: { unit: 'seconds', flag: '--min-healthy', default: 3, atLeast: 0, help: 'a replacement must be ready this long before the replica it replaces stops taking traffic' },
  drainTimeoutMs: { unit: 'seconds', flag: '--drain-timeout', default: 60, above: 0, help: "longest wait for a stepped-down replica's in-flight requests" },
  maxLostFraction: { unit: 'fraction', flag: '--max-lost-fraction', default: 0.5, above: 0, atMost: 1, help: 'above this share of nodes silent at once, their replicas are not replaced' },
  coldStartTimeoutMs: { unit: 'seconds', flag: '--cold-start-timeout', default: 300, above: 0, help: 'how long a request for a model scaled to zero waits for a replica' },
  headersTimeoutMs: { unit: 'seconds', flag: '--headers-timeout', default: 10, above: 0, help: "longest wait for a request's headers; the connection is then closed (both listeners)" },
  requestTimeoutMs: {
    unit: 'seconds',
    flag: '--request-timeout',
    default: 60,
    above: 0,
    help: 'longest wait for a whole request, headers and body, before a 408 and close (both listeners; long-polls and streams are responses, so not cut)',
  },
  // Longer than the 60 s idle timeout of common load balancers, so they close first.
  keepAliveTimeoutMs: { unit: 'seconds', flag: '--idle-timeout', default: 65, above: 0, help: 'how long a kept-alive connection may sit idle between requests (both listeners)' },
  maxConnections: { unit: 'count', flag: '--max-connections', default: 1024, above: 0, help: 'connections open at once per listener; more are closed as they arrive' },
  tlsCert: { unit: 'text', flag: '--tls-cert', placeholder: 'file', help: "the admin listener's certificate (PEM, chain ending with its CA) instead of the generated one" },
  tlsKey: { unit: 'text', flag: '--tls-key', placeholder: 'file', help: 'the private key of --tls-cert (PEM)' },
  tlsSan: { unit: 'names', flag: '--tls-san', placeholder: 'name', help: 'another name or address the generated certificate must carry (repeat, or comma-separate)' },
  insecureHttp: { unit: 'switch', flag: '--insecure-http', help: 'serve the admin listener as plain HTTP (only behind a proxy that terminates TLS)' },
  clientTlsCert: { unit: 'text', flag: '--client-tls-cert', placeholder: 'file', help: "the client listener's certificate (PEM); with --client-tls-key it serves HTTPS" },
  clientTlsKey: { unit: 'text', flag: '--client-tls-key', placeholder: 'file', help: 'the private key of --client-tls-cert (PEM)' },
  joinApproval: {
    unit: 'text',
    flag: '--join-approval',
    placeholder: 'mode',
    default: 'auto',
    choices: JOIN_APPROVALS,
    help: 'auto: a node that joins takes work at once; manual: it waits as pending-approval until ctl nodes approve',
  },
  modelsDir: { unit: 'text', flag: '--models-dir', placeholder: 'dir', help: 'serve the model files in this directory to agents (node credential, resumable) as llmgw://FILE sources' },
  logLevel: { unit: 'text', flag: '--log-level', placeholder: 'level', default: 'info', help: 'debug, info, warn or error' },
} as const satisfies Record<string, Setting>;

type Table = typeof SERVER_SETTINGS;
/** A setting's name in {@link ServerConfig}. */
export type SettingName = keyof Table;

type ValueOf<S> = S extends { unit: 'text'; choices: readonly (infer C)[] }
  ? C
  : S extends { unit: 'text'; default: string }
    ? string
    : S extends { unit: 'text' }
      ? string | undefined
      : S extends { unit: 'switch' }
        ? boolean
        : S extends { unit: 'names' }
          ? string[]
          : number;

/** Every setting, validated: numbers within their bounds, seconds already in ms. */
export type ServerConfig = { -readonly [K in SettingName]: ValueOf<Table[K]> };

/** The measured settings, which `startServer` takes as they are. */
export type ServerTuning = { -readonly [K in SettingName as Table[K] extends Measured ? K : never]: number };

/** The environment variable of a flag: `--lost-after` → `LLMGW_LOST_AFTER`. */
export function envOf(flag: string): string {
  return `LLMGW_${flag.slice(2).toUpperCase().replace(/-/g, '_')}`;
}

const PLACEHOLDERS: Record<Unit, string> = { seconds: 'seconds', count: 'n', bytes: 'bytes', tokens: 'tokens', fraction: '0..1' };

/** `a number of seconds > 0`: what a measured setting must be, for its message. */
export function describeBounds(s: Measured): string {
  const what = { seconds: 'a number of seconds', count: 'a whole number', bytes: 'a whole number of bytes', tokens: 'a whole number of tokens', fraction: 'a fraction' }[s.unit];
  const bounds = [...(s.above !== undefined ? [`> ${s.above}`] : []), ...(s.atLeast !== undefined ? [`>= ${s.atLeast}`] : []), ...(s.atMost !== undefined ? [`<= ${s.atMost}`] : [])];
  return `${what} ${bounds.join(' and ')}`;
}

function optionOf(s: Setting): Option {
  switch (s.unit) {
    case 'switch':
      // Not commander's .env(): it would turn the flag on for LLMGW_INSECURE_HTTP=0.
      return new Option(s.flag, `${s.help} (or ${envOf(s.flag)}=1; 0/false/no/off is off)`);
    case 'names':
      return new Option(`${s.flag} <${s.placeholder}>`, s.help).env(envOf(s.flag)).argParser(collectSans).default([]);
    case 'text': {
      const o = new Option(`${s.flag} <${s.placeholder}>`, s.help).env(envOf(s.flag));
      if (s.choices) o.choices(s.choices);
      return s.default === undefined ? o : o.default(s.default);
    }
    default: {
      const mib = s.unit === 'bytes' && s.default % 2 ** 20 === 0 ? ` (${s.default / 2 ** 20} MiB)` : '';
      return new Option(`${s.flag} <${PLACEHOLDERS[s.unit]}>`, s.help).env(envOf(s.flag)).default(String(s.default), `${s.default}${mib}`);
    }
  }
}

/** The option of one setting, e.g. for a subcommand that shares it; `help` replaces its text. */
export function settingOption(name: SettingName, help?: string): Option {
  const s: Setting = SERVER_SETTINGS[name];
  return optionOf(help === undefined ? s : { ...s, help });
}

/** Adds every setting's option to `cmd`, in the table's order. */
export function addServerOptions(cmd: Command): Command {
  for (const s of Object.values(SERVER_SETTINGS)) cmd.addOption(optionOf(s));
  return cmd;
}

/** A measured value as given (a string) in the setting's unit, or the one-line reason it is refused. */
export function readMeasured(s: Measured, raw: string, from: string = s.flag): number {
  const n = Number(raw);
  const whole = s.unit !== 'seconds' && s.unit !== 'fraction';
  // Number('') is 0, so a blank value would pass as 0 where 0 is allowed.
  const ok = raw.trim() !== '' && Number.isFinite(n) && (!whole || Number.isInteger(n)) && (s.above === undefined || n > s.above) && (s.atLeast === undefined || n >= s.atLeast) && (s.atMost === undefined || n <= s.atMost);
  if (!ok) throw new Error(`${from} must be ${describeBounds(s)}, got '${raw}'`);
  return s.unit === 'seconds' ? n * 1000 : n;
}

/**
 * Every setting of a parsed `cmd` (see {@link addServerOptions}), validated; throws the
 * first refused one's message, naming the variable when the value came from it.
 */
export function readServerSettings(cmd: Command, env: Record<string, string | undefined> = process.env): ServerConfig {
  const values = cmd.opts<Record<string, unknown>>();
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(SERVER_SETTINGS) as [SettingName, Setting][]) {
    const key = optionOf(s).attributeName();
    const value = values[key];
    if (s.unit === 'switch') out[name] = flagOrEnv(value === true ? true : undefined, envOf(s.flag), env);
    else if (s.unit === 'text' || s.unit === 'names') out[name] = value;
    else out[name] = readMeasured(s, String(value), cmd.getOptionValueSource(key) === 'env' ? envOf(s.flag) : s.flag);
  }
  return out as ServerConfig;
}

/** Every measured setting at its default, in ms where the flag takes seconds (for in-process servers: tests). */
export function defaultTuning(): ServerTuning {
  const out: Record<string, number> = {};
  for (const [name, s] of Object.entries(SERVER_SETTINGS) as [SettingName, Setting][]) if (isMeasured(s)) out[name] = readMeasured(s, String(s.default));
  return out as ServerTuning;
}

/** The measured settings of `config`, which `startServer` takes as they are. */
export function tuningOf(config: ServerConfig): ServerTuning {
  const out: Record<string, number> = {};
  for (const [name, s] of Object.entries(SERVER_SETTINGS) as [SettingName, Setting][]) if (isMeasured(s)) out[name] = config[name] as number;
  return out as ServerTuning;
}

function isMeasured(s: Setting): s is Measured {
  return s.unit !== 'text' && s.unit !== 'switch' && s.unit !== 'names';
}
