import os from 'node:os';
import path from 'node:path';
import bytes from 'bytes';
import { isLoopbackHost, type MeasuredOf, type SettingsOf, type SettingsTable } from '@llmgw/shared';
import { DEFAULT_ENGINE_USER } from './engine-user.js';
import { STATE_DIR } from './service.js';

/**
 * The state directory when --state-dir is not given, absolute so that an agent started
 * from another directory finds its engines and credential again: as root, where
 * `install-service` (and its unit's StateDirectory=) keeps it; otherwise the XDG state
 * directory, `$XDG_STATE_HOME/llmgw-agent`, else `~/.local/state/llmgw-agent`.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env, uid: number = process.getuid?.() ?? -1, home: string = os.homedir()): string {
  if (uid === 0) return STATE_DIR;
  const xdg = env.XDG_STATE_HOME;
  // The XDG spec: a relative value is invalid and is to be ignored.
  const base = xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(home, '.local', 'state');
  return path.join(base, 'llmgw-agent');
}

const SERVER_HELP =
  "the server's admin address, or several separated by commas (instances of one control plane, e.g. https://a:8081,https://b:8081): " +
  "when the one in use is unreachable, times out or answers 502/503/504, the agent moves to the next and stays there; the join token's CA pin holds for all";

/**
 * Every setting of `llmgw-agent run`, each declared here once: its name in {@link RunSettings}
 * (seconds become `…Ms`), its flag (the variable is `LLMGW_` and the flag in capitals),
 * unit, default, bounds and help; the derivation is `@llmgw/shared`'s. The order is `--help`'s.
 */
export const RUN_SETTINGS = {
  server: { unit: 'text', flag: '--server', placeholder: 'url,...', default: 'https://127.0.0.1:8081', help: SERVER_HELP },
  ca: {
    unit: 'text',
    flag: '--ca',
    placeholder: 'file',
    help: "the server's CA (PEM); needed when the join token is only the secret, checked against its pin otherwise",
  },
  insecureHttp: { unit: 'switch', flag: '--insecure-http', help: 'allow an http:// --server on another machine (only behind a proxy that terminates TLS)' },
  nodeId: { unit: 'text', flag: '--node-id', placeholder: 'id', help: 'stable node id (default: the hostname)' },
  labels: { unit: 'text', flag: '--labels', placeholder: 'k=v,...', default: '', help: 'labels for node_selector matching' },
  pool: { unit: 'text', flag: '--pool', placeholder: 'name', help: 'pool for sharded placement (nodes that share a fabric)' },
  fabrics: {
    unit: 'text',
    flag: '--fabrics',
    placeholder: 'names',
    default: '',
    help: 'extra interconnect names, comma-separated (InfiniBand/RoCE/NVLink are detected)',
  },
  advertiseAddr: {
    unit: 'text',
    flag: '--advertise-addr',
    placeholder: 'host',
    help: 'address the server reaches engines on this node at (default: loopback for a local server, else the first non-internal IPv4)',
  },
  engineHost: { unit: 'text', flag: '--engine-host', placeholder: 'host', default: '0.0.0.0', help: 'address engines listen on' },
  nvidiaSmi: { unit: 'text', flag: '--nvidia-smi', placeholder: 'path', default: 'nvidia-smi', help: 'nvidia-smi executable (absent = a CPU node)' },
  procRoot: { unit: 'text', flag: '--proc-root', placeholder: 'dir', default: '/proc', help: 'where to read meminfo and cgroup membership' },
  sysRoot: { unit: 'text', flag: '--sys-root', placeholder: 'dir', default: '/sys', help: 'where to read cgroup limits and InfiniBand devices' },
  stateDir: {
    unit: 'text',
    flag: '--state-dir',
    placeholder: 'dir',
    default: defaultStateDir(),
    help: 'where the agent keeps what must survive its restart (engine pids, logs, the node credential); default: /var/lib/llmgw-agent as root, else $XDG_STATE_HOME/llmgw-agent or ~/.local/state/llmgw-agent',
  },
  modelCache: {
    unit: 'text',
    flag: '--model-cache',
    placeholder: 'dir',
    help: 'where fetched model files (http(s):// and llmgw:// sources) are kept, by SHA-256 (default: <state-dir>/models)',
  },
  modelCacheMax: {
    unit: 'text',
    flag: '--model-cache-max',
    placeholder: 'size',
    help: 'bound on the model cache, e.g. 50G: least recently used files no shard uses are deleted (default: 80% of its disk)',
  },
  sourceHeader: {
    unit: 'list',
    flag: '--source-header',
    placeholder: 'host=Name: value',
    // A header's value may hold commas, and a secret one belongs in a file, not the environment.
    commas: false,
    env: false,
    help: "a header sent with model file requests to HOST (a private store), repeatable; a value '@FILE' is read from FILE, e.g. 'models.example.com=Authorization: @/etc/llmgw/models-token'",
  },
  heartbeatIntervalMs: { unit: 'seconds', flag: '--heartbeat-interval', default: 5, above: 0, help: 'seconds between heartbeats' },
  portRange: { unit: 'text', flag: '--port-range', placeholder: 'lo-hi', default: '40000-40999', help: 'ports engines may listen on' },
  vllmBin: { unit: 'text', flag: '--vllm-bin', placeholder: 'path', default: 'vllm', help: 'vllm executable' },
  vllmPython: {
    unit: 'text',
    flag: '--vllm-python',
    placeholder: 'path',
    help: 'python with vllm installed: vLLM then gets its key on a descriptor, not in VLLM_API_KEY, which every engine of the engine user can read (default: --vllm-bin and VLLM_API_KEY)',
  },
  sglangPython: { unit: 'text', flag: '--sglang-python', placeholder: 'path', default: 'python3', help: 'python with sglang installed' },
  llamaServerBin: { unit: 'text', flag: '--llama-server-bin', placeholder: 'path', default: 'llama-server', help: 'llama.cpp llama-server executable' },
  maxRestarts: { unit: 'count', flag: '--max-restarts', default: 5, atLeast: 0, help: 'engine restarts within 10 minutes before a shard is reported failed' },
  restartBackoffMs: {
    unit: 'seconds',
    flag: '--restart-backoff',
    default: 1,
    above: 0,
    help: 'first wait before restarting a crashed engine (doubles each time, up to 30 s)',
  },
  logLevel: { unit: 'text', flag: '--log-level', placeholder: 'level', default: 'info', help: 'debug, info, warn or error' },
  allowCommandEngine: {
    unit: 'switch',
    flag: '--allow-command-engine',
    help: "run `engine: command` profiles, whose argv the server names (off: such shards are reported failed; like Nomad's raw_exec)",
  },
  engineUser: {
    unit: 'text',
    flag: '--engine-user',
    placeholder: 'name',
    help: `account engines run as when the agent is root (default: ${DEFAULT_ENGINE_USER}; not root: engines run as the agent's own user)`,
  },
  stopEnginesOnExit: {
    unit: 'switch',
    flag: '--stop-engines-on-exit',
    help: 'stop engines when the agent exits (for a laptop; a service keeps them running across upgrades)',
  },
} as const satisfies SettingsTable;

/** Every setting of `run`, validated: numbers within their bounds, seconds already in ms. */
export type RunSettings = SettingsOf<typeof RUN_SETTINGS>;
/** The measured settings of `run`. */
export type RunTuning = MeasuredOf<typeof RUN_SETTINGS>;

/** `role=coding,zone=a` → `{role: 'coding', zone: 'a'}`; throws a one-line error on a bad pair. */
export function parseLabels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`invalid label "${pair}": want key=value, e.g. --labels role=coding,zone=a`);
    out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

/** `40000-40999` → [40000, 40999]. */
export function parsePortRange(text: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(text.trim());
  const lo = m ? Number(m[1]) : NaN;
  const hi = m ? Number(m[2]) : NaN;
  if (!m || lo < 1 || hi > 65535 || lo > hi) throw new Error(`invalid port range "${text}": want LOW-HIGH, e.g. 40000-40999`);
  return [lo, hi];
}

/**
 * Node ids must be stable and URL-safe. The hostname is what operators recognise in
 * `ctl nodes`, so it is the default, normalised to the id alphabet.
 */
export function defaultNodeId(): string {
  return (
    os
      .hostname()
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '') || 'node'
  );
}

/**
 * The address the server reaches this node's engines at. A server on loopback means a
 * single-machine setup, so loopback is right; otherwise the first non-internal IPv4.
 */
export function defaultAdvertiseAddr(serverUrl: string): string {
  let host = '';
  try {
    host = new URL(serverUrl).hostname;
  } catch {
    /* validated elsewhere */
  }
  if (isLoopbackHost(host)) return '127.0.0.1';
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/**
 * A size such as `50G`, `500MB` or `1.5T` in bytes (binary units, parsed by `bytes`,
 * which wants `GB`: a bare `G` is taken as `GB`, as `du -h` writes it). Throws on anything else.
 */
export function parseSize(flag: string, text: string): number {
  const t = text.trim().replace(/^([\d.]+)\s*([kmgtp])$/i, '$1$2B');
  const n = /^[\d.]+\s*[kmgtp]?b$/i.test(t) || /^\d+$/.test(t) ? bytes.parse(t) : null;
  if (n === null || !Number.isFinite(n) || n <= 0) throw new Error(`invalid ${flag} "${text}": want a size such as 50G, 500M or 2T`);
  return n;
}
