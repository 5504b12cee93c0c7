import { engineEnvRefusal, type ShardAssignment } from '@llmgw/shared';
import { adapterArgs, adapterList } from './adapters.js';

/**
 * Where the engines live on this node. Paths come from agent flags so that a node can
 * pin versions (a venv's `vllm`, a particular `llama-server` build) without PATH games.
 */
export interface EngineBins {
  vllm: string;
  /**
   * A Python interpreter that has vllm installed (`--vllm-python`): vLLM is then started
   * through {@link VLLM_LAUNCHER} with its key on descriptor 3. Absent: `vllm` with the
   * key in VLLM_API_KEY.
   */
  vllmPython?: string;
  /** A Python interpreter that has sglang installed (`python3 -m sglang.launch_server`). */
  sglangPython: string;
  llamaServer: string;
  /** llmgw's own CPU engine; a `.js`/`.mjs` path is run with this Node (process.execPath). */
  nodeLlamaCpp: string;
  /**
   * llmgw's engine programs by bin name (`llmgw-test-engine`, `node-llama-cpp-engine`),
   * as installed with the agent (`findEnginePrograms`). A `command` template whose first
   * element names one runs that script with this Node, so tests and the quick start need
   * no PATH setup.
   */
  programs?: ReadonlyMap<string, string>;
}

/** What the supervisor knows about the place a shard runs. */
export interface CommandContext {
  /** The address the engine binds to. */
  host: string;
  port: number;
  bins: EngineBins;
  /**
   * `engine: command` runs any argv the server names, so an agent runs it only when its
   * operator said so (`--allow-command-engine`), as Nomad's raw_exec must be enabled.
   */
  allowCommandEngine?: boolean;
}

/**
 * The variable llmgw's own engines (llmgw-test-engine, node-llama-cpp-engine) and
 * `engine: command` programs read their API key from. Kept in step with
 * `ENGINE_API_KEY_ENV` in @llmgw/engine-http, which the agent does not depend on.
 */
export const ENGINE_API_KEY_ENV = 'LLMGW_ENGINE_API_KEY';

/**
 * Where each engine finds the per-replica key when it is not on descriptor 3
 * ({@link KEY_ON_FD}): the environment, never argv, because every local user can read a
 * process's command line (`ps -eo args`, /proc/PID/cmdline). The environment is
 * readable by the process's owner, so by every engine of the same engine user: vLLM and
 * llama.cpp, which take no descriptor, and `command` programs other than llmgw's.
 */
export const API_KEY_ENV: Record<string, string> = {
  vllm: 'VLLM_API_KEY',
  'llama.cpp': 'LLAMA_API_KEY',
  sglang: ENGINE_API_KEY_ENV,
  'node-llama-cpp': ENGINE_API_KEY_ENV,
  command: ENGINE_API_KEY_ENV,
};

/**
 * The engines that read their key from descriptor 3 (a 0400 file the agent opened and
 * unlinked; `supervisor/spawn.ts`): llmgw's own through `--api-key-file /dev/fd/3`,
 * SGLang through {@link SGLANG_LAUNCHER}, and vLLM with `--vllm-python` through
 * {@link VLLM_LAUNCHER}. The key is then in neither their environment
 * nor their command line.
 */
const KEY_ON_FD = new Set(['sglang', 'node-llama-cpp']);

/**
 * `python -c VLLM_LAUNCHER serve ARGS...` is `vllm serve ARGS... --api-key K` with K read
 * from descriptor 3 (then closed), added to `sys.argv` in memory as for SGLang. The
 * entry point is the one the `vllm` console script calls (`vllm.scripts` before 0.8).
 */
export const VLLM_LAUNCHER = [
  'import os, sys',
  'try:',
  "    with os.fdopen(3, 'r') as f: k = f.read().strip()",
  'except OSError:',
  "    k = os.environ.pop('VLLM_API_KEY', '')",
  "sys.argv = ['vllm'] + sys.argv[1:] + (['--api-key', k] if k else [])",
  'try:',
  '    from vllm.entrypoints.cli.main import main',
  'except ImportError:',
  '    from vllm.scripts import main',
  'sys.exit(main())',
].join('\n');

/** What llmgw's engines are told: read the key from the descriptor the agent hands over. */
const KEY_FILE_ARGS = ['--api-key-file', '/dev/fd/3'];

/**
 * `python3 -c SGLANG_LAUNCHER ARGS...` runs `sglang.launch_server ARGS... --api-key K`
 * with K read from descriptor 3 (then closed), or, from an older agent's set-up, popped
 * from LLMGW_ENGINE_API_KEY: the key reaches SGLang's argument parser through `sys.argv`
 * in memory, never through exec, so no process's command line or environment holds it.
 */
export const SGLANG_LAUNCHER = [
  'import os, runpy, sys',
  'try:',
  "    with os.fdopen(3, 'r') as f: k = f.read().strip()",
  'except OSError:',
  `    k = os.environ.pop('${ENGINE_API_KEY_ENV}', '')`,
  "sys.argv = ['sglang.launch_server'] + sys.argv[1:] + (['--api-key', k] if k else [])",
  "runpy.run_module('sglang.launch_server', run_name='__main__', alter_sys=True)",
].join('\n');

/** A launchable engine: argv[0] is the program, `env` is added to the agent's environment. */
export interface EngineCommand {
  argv: string[];
  env: Record<string, string>;
  /** False for followers of a multi-node replica: they serve no HTTP, alive = ready. */
  http: boolean;
  /** The key goes to the engine as descriptor 3 (and is in `env` under no name). */
  keyOnFd?: boolean;
}

/** A refused `engine: command` shard's failed reason, in `ctl replicas` and explain. */
export const COMMAND_REFUSED = 'this agent does not allow engine: command (start it with --allow-command-engine, or LLMGW_ALLOW_COMMAND_ENGINE=1)';

/**
 * The command line for one shard.
 *
 * - `vllm`: `vllm serve SOURCE --served-model-name MODEL --host H --port P
 *   --tensor-parallel-size GPUS`, the key in VLLM_API_KEY. Multi-node uses vLLM's multiprocessing
 *   backend (agent.md §3, vLLM docs `parallelism_scaling.md`): TP = GPUs per node and
 *   PP = nodes, i.e. `--pipeline-parallel-size SHARDS --nnodes SHARDS --node-rank R
 *   --master-addr A --master-port P`, identical on every node, plus `--headless` on
 *   ranks > 0, which run no API server.
 * - `sglang`: `python3 -c SGLANG_LAUNCHER --model-path SOURCE --served-model-name
 *   MODEL --host H --port P --tp-size T` (= `python3 -m sglang.launch_server`, plus
 *   `--api-key` from LLMGW_ENGINE_API_KEY added in memory). Multi-node adds `--nnodes N
 *   --node-rank R --dist-init-addr A:P`; SGLang wants the same total `--tp-size` on every
 *   node, so T = GPUs per node × shards. Ranks > 0 serve no HTTP.
 * - `llama.cpp`: `llama-server -m SOURCE --alias MODEL --host H --port P
 *   [-ngl 999 when the shard has GPUs]`, the key in LLAMA_API_KEY; single node only (its RPC mode is not wired up).
 * - `node-llama-cpp`: `BIN --model SOURCE --served-name MODEL --host H --port P`, the
 *   key in LLMGW_ENGINE_API_KEY; single node only.
 * - `command`: see {@link expandTemplate}; the key in LLMGW_ENGINE_API_KEY.
 *
 * Profile `args` always come last so that an operator can override a flag set here
 * (argparse-style CLIs take the last occurrence). Throws on an unknown engine or an
 * assignment the engine cannot run; the supervisor reports that as a failed shard.
 */
export function buildCommand(a: ShardAssignment, ctx: CommandContext): EngineCommand {
  // The server refuses these at catalog load; an agent checks too (an older server, a
  // forged assignment), unless it runs any command anyway.
  if (ctx.allowCommandEngine !== true) {
    for (const name of Object.keys(a.env)) {
      const refused = engineEnvRefusal(a.engine, name);
      if (refused) throw new Error(`profile env ${name} ${refused}`);
    }
  }
  const onFd = a.api_key !== undefined && a.api_key !== '' && takesKeyOnFd(a, ctx);
  const env = { ...engineEnv(a), ...(onFd ? {} : keyEnv(a)) };
  const key = onFd ? { keyOnFd: true } : {};
  // llmgw's engines read the descriptor through a flag, before the profile's args.
  const keyArgs = onFd && (a.engine === 'node-llama-cpp' || a.engine === 'command') ? KEY_FILE_ARGS : [];
  switch (a.engine) {
    case 'vllm':
      return { argv: [...vllmArgv(a, ctx), ...a.args], env, http: a.rank === 0, ...key };
    case 'sglang':
      return { argv: [...sglangArgv(a, ctx), ...a.args], env, http: a.rank === 0, ...key };
    case 'llama.cpp':
      return { argv: [...llamaServerArgv(a, ctx), ...a.args], env, http: true };
    case 'node-llama-cpp':
      return { argv: [...nodeLlamaCppArgv(a, ctx), ...keyArgs, ...a.args], env, http: true, ...key };
    case 'command':
      if (ctx.allowCommandEngine !== true) throw new Error(COMMAND_REFUSED);
      return { argv: [...expandTemplate(a, ctx), ...keyArgs, ...a.args], env, http: a.rank === 0, ...key };
    default:
      throw new Error(`unknown engine "${a.engine}" (want vllm, sglang, llama.cpp, node-llama-cpp or command)`);
  }
}

/** Whether the shard's engine reads its key from descriptor 3: SGLang, node-llama-cpp, and a `command` running one of llmgw's programs. */
function takesKeyOnFd(a: ShardAssignment, ctx: CommandContext): boolean {
  if (KEY_ON_FD.has(a.engine)) return true;
  if (a.engine === 'vllm') return ctx.bins.vllmPython !== undefined;
  return a.engine === 'command' && a.command !== undefined && a.command.length > 0 && ctx.bins.programs?.has(a.command[0] ?? '') === true;
}

/**
 * Profile env, then the GPU pinning, which wins: the agent decides which GPUs a shard
 * owns. UUIDs rather than indices because indices shift when a GPU falls off the bus;
 * PCI_BUS_ID order because CUDA's default "fastest first" can differ from nvidia-smi's.
 * A CPU shard gets an empty CUDA_VISIBLE_DEVICES so it cannot grab a GPU another shard owns.
 */
export function engineEnv(a: ShardAssignment): Record<string, string> {
  const env: Record<string, string> = { ...a.env };
  if (a.gpus.length > 0) {
    env.CUDA_VISIBLE_DEVICES = a.gpus.join(',');
    env.CUDA_DEVICE_ORDER = 'PCI_BUS_ID';
  } else {
    env.CUDA_VISIBLE_DEVICES = '';
  }
  return env;
}

/** The key's variable for the shard's engine; after the profile env, so a profile cannot replace the key. */
function keyEnv(a: ShardAssignment): Record<string, string> {
  const name = API_KEY_ENV[a.engine];
  return a.api_key && name ? { [name]: a.api_key } : {};
}

/** Multi-node engines cannot rendezvous without rank 0's address; fail loudly, not with a hang. */
function rendezvous(a: ShardAssignment): { addr: string; port: number } {
  if (!a.master_addr || !a.master_port) {
    throw new Error(`shard ${a.id} is rank ${a.rank} of ${a.shards} but has no master_addr/master_port to meet rank 0 at`);
  }
  return { addr: a.master_addr, port: a.master_port };
}

function singleNodeOnly(a: ShardAssignment, engine: string): void {
  if (a.shards > 1) {
    throw new Error(`engine ${engine} cannot run a model across nodes (profile asks for ${a.shards} shards); use vllm or sglang, or shards: 1`);
  }
}

function vllmArgv(a: ShardAssignment, ctx: CommandContext): string[] {
  const argv = [
    ...(ctx.bins.vllmPython !== undefined ? [ctx.bins.vllmPython, '-c', VLLM_LAUNCHER] : [ctx.bins.vllm]),
    'serve',
    a.source,
    '--served-model-name',
    a.model,
    '--host',
    ctx.host,
    '--port',
    String(ctx.port),
    '--tensor-parallel-size',
    String(a.gpus.length || 1),
    ...adapterArgs('vllm', a),
  ];
  if (a.shards > 1) {
    const m = rendezvous(a);
    argv.push(
      '--pipeline-parallel-size',
      String(a.shards),
      '--nnodes',
      String(a.shards),
      '--node-rank',
      String(a.rank),
      '--master-addr',
      m.addr,
      '--master-port',
      String(m.port),
    );
    if (a.rank > 0) argv.push('--headless');
  }
  return argv;
}

function sglangArgv(a: ShardAssignment, ctx: CommandContext): string[] {
  const perNode = a.gpus.length || 1;
  const argv = [
    ctx.bins.sglangPython,
    '-c',
    SGLANG_LAUNCHER,
    '--model-path',
    a.source,
    '--served-model-name',
    a.model,
    '--host',
    ctx.host,
    '--port',
    String(ctx.port),
    '--tp-size',
    String(perNode * a.shards),
    ...adapterArgs('sglang', a),
  ];
  if (a.shards > 1) {
    const m = rendezvous(a);
    argv.push('--nnodes', String(a.shards), '--node-rank', String(a.rank), '--dist-init-addr', `${m.addr}:${m.port}`);
  }
  return argv;
}

function llamaServerArgv(a: ShardAssignment, ctx: CommandContext): string[] {
  singleNodeOnly(a, 'llama.cpp');
  return [
    ctx.bins.llamaServer,
    '-m',
    a.source,
    '--alias',
    a.model,
    '--host',
    ctx.host,
    '--port',
    String(ctx.port),
    // Newer builds default to "auto", older ones to 0 (CPU); the agent already chose.
    ...(a.gpus.length > 0 ? ['-ngl', '999'] : []),
    ...adapterArgs('llama.cpp', a),
  ];
}

function nodeLlamaCppArgv(a: ShardAssignment, ctx: CommandContext): string[] {
  singleNodeOnly(a, 'node-llama-cpp');
  return [
    ...program(ctx.bins.nodeLlamaCpp),
    '--model',
    a.source,
    '--served-name',
    a.model,
    '--host',
    ctx.host,
    '--port',
    String(ctx.port),
    ...adapterArgs('node-llama-cpp', a),
  ];
}

/** A script path is run with this very Node, so it needs no shebang, exec bit or PATH. */
function program(bin: string): string[] {
  return /\.(c|m)?js$/.test(bin) ? [process.execPath, bin] : [bin];
}

/**
 * The `command` engine: each element of the template has `{host}`, `{port}`, `{model}`,
 * `{source}`, `{gpus}` (UUIDs, comma-joined), `{rank}`, `{shards}`, `{master_addr}` and
 * `{master_port}`, `{adapters}` (LoRA adapters as `name=path,…`) and `{max_loaded_adapters}` (the
 * adapter slots, the test engine's `--max-loras`) replaced (absent values become ''). The key is never put on the
 * command line, where `ps` shows it to every local user: it is in LLMGW_ENGINE_API_KEY.
 * `{api_key}`, which templates from before used, is therefore dropped: an element that
 * is exactly `{api_key}` together with a preceding flag (`--api-key {api_key}`), an
 * element that contains it (`--key={api_key}`) on its own.
 * A first element naming one of `ctx.bins.programs` runs that program.
 */
export function expandTemplate(a: ShardAssignment, ctx: CommandContext): string[] {
  if (!a.command || a.command.length === 0) {
    throw new Error(`shard ${a.id}: engine "command" needs a non-empty command template`);
  }
  const values: Record<string, string> = {
    host: ctx.host,
    port: String(ctx.port),
    model: a.model,
    source: a.source,
    gpus: a.gpus.join(','),
    rank: String(a.rank),
    shards: String(a.shards),
    master_addr: a.master_addr ?? '',
    master_port: a.master_port === undefined ? '' : String(a.master_port),
    adapters: adapterList(a),
    max_loaded_adapters: a.adapters?.length ? String(a.max_loaded_adapters ?? a.adapters.length) : '',
  };
  const out: string[] = [];
  for (const element of a.command) {
    if (element === '{api_key}') {
      if (out.length > 1 && out[out.length - 1]?.startsWith('-') === true) out.pop();
      continue;
    }
    if (element.includes('{api_key}')) continue;
    out.push(element.replace(/\{([a-z_]+)\}/g, (whole, name: string) => (Object.hasOwn(values, name) ? (values[name] ?? whole) : whole)));
  }
  const [first = '', ...args] = out;
  const installed = ctx.bins.programs?.get(first);
  return installed === undefined ? out : [...program(installed), ...args];
}
