import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asEngineUser, type EngineUser } from '../engine-user.js';
import { readProcStat } from '../proc.js';
import { openPrivateAppend, privateDir } from './private-files.js';

/**
 * The agent's variables an engine inherits: the basics a program expects, and the
 * GPU, NCCL and model-hub stacks' own settings, which an operator may set for every
 * engine on the node. Nothing else: the agent's environment holds its credentials
 * (LLMGW_JOIN_TOKEN, the node credential) and settings an engine has no business with;
 * an engine's own variables come from its profile and the agent (`extra`).
 */
const INHERITED = new Set(['PATH', 'LANG', 'LANGUAGE', 'TZ', 'TERM', 'TMPDIR', 'LD_LIBRARY_PATH']);
const INHERITED_PREFIXES = [
  'LC_',
  'CUDA_',
  'NCCL_',
  'NVIDIA_',
  'HF_',
  'HUGGINGFACE_',
  'TRANSFORMERS_',
  'TORCH_',
  'PYTORCH_',
  'TRITON_',
  'OMP_',
  'GLOO_',
  'UCX_',
];

/** A running engine, launched by this agent or adopted from an earlier one. */
export interface RunningProcess {
  pid: number;
  /** Equal to pid: `detached` makes the engine a session and group leader. */
  pgid: number;
  /** /proc start time: with the pid, what identifies the engine to a later agent. */
  startTime: number;
  /** Absent for an engine adopted from an earlier agent: its exit is found by polling. */
  child?: ChildProcess;
}

/** How the caller hears of the end of a spawned engine; each is called at most once. */
export interface SpawnCallbacks {
  /** The engine exited; `how` is its code and signal in words. */
  onExit(how: string): void;
  /** The binary could not be started at all (ENOENT, EACCES). */
  onSpawnError(err: Error): void;
}

/**
 * Starts an engine as its own process group (`detached`), unref'd, writing to `logFile`
 * through a file descriptor — not a pipe, which would break (SIGPIPE) when the agent
 * exits: engines outlive the agent. Undefined when the spawn failed asynchronously
 * (`onSpawnError` follows); throws when it failed at once.
 */
export function spawnEngine(
  argv: readonly string[],
  env: Record<string, string>,
  logFile: string,
  on: SpawnCallbacks,
  user?: EngineUser,
  key?: KeyOnFd,
): RunningProcess | undefined {
  const [bin = '', ...args] = asEngineUser(argv, user);
  // Opened by the agent and handed over: an engine running as another user writes its
  // log without being able to open (or read) anything in the agent's state directory.
  const fd = openPrivateAppend(logFile);
  let keyFd: number | undefined;
  let child: ChildProcess;
  try {
    keyFd = key === undefined ? undefined : openKeyFile(key);
    const stdio: StdioOptions = keyFd === undefined ? ['ignore', fd, fd] : ['ignore', fd, fd, keyFd];
    child = spawn(bin, args, { detached: true, stdio, env: engineEnvironment(env, user) });
  } finally {
    fs.closeSync(fd);
    if (keyFd !== undefined) fs.closeSync(keyFd);
  }
  child.once('error', (err) => {
    if (child.pid === undefined) on.onSpawnError(err);
  });
  if (child.pid === undefined) return undefined; // 'error' follows
  child.once('exit', (code, signal) => on.onExit(describeExit(code, signal)));
  child.unref();
  const startTime = readProcStat(child.pid)?.startTime ?? 0;
  return { pid: child.pid, pgid: child.pid, startTime, child };
}

/** The engine's key, handed over as descriptor 3 ({@link KEY_FD}) instead of in its environment. */
export interface KeyOnFd {
  /** The agent's own folder for key files (`<state-dir>/keys`, 0700). */
  dir: string;
  secret: string;
}

/** The descriptor an engine finds its key on: `--api-key-file /dev/fd/3`. */
export const KEY_FD = 3;

/**
 * A 0400 key file of the agent's, opened for reading and unlinked at once: the open
 * descriptor, inherited by the engine as fd 3, is the only way to the key. The engine
 * reads the descriptor itself and closes it; no other process can open it by path
 * (gone), nor through `/proc/PID/fd/3` (that re-opens the inode, and a 0400 file of
 * root's refuses the engine user; a closed descriptor is not there at all), nor read it
 * in `/proc/PID/environ`, which every process of the same user can.
 */
export function openKeyFile(key: KeyOnFd): number {
  privateDir(key.dir);
  const file = path.join(key.dir, `${randomBytes(12).toString('hex')}.key`);
  const w = fs.openSync(file, 'wx', 0o400);
  try {
    fs.fchmodSync(w, 0o400);
    fs.writeSync(w, `${key.secret}\n`);
  } finally {
    fs.closeSync(w);
  }
  try {
    return fs.openSync(file, 'r');
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/**
 * An engine's whole environment, built from an allow-list rather than the agent's
 * minus a deny-list, so a credential added to the agent later cannot leak by default:
 * the inherited basics and GPU/hub settings (see INHERITED), HOME, USER and LOGNAME of
 * the account it runs as, then `extra` (the profile's and the agent's variables for this
 * engine, GPU pinning and key included), which wins.
 */
export function engineEnvironment(extra: Record<string, string>, user?: EngineUser, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(from)) {
    if (v !== undefined && (INHERITED.has(k) || INHERITED_PREFIXES.some((p) => k.startsWith(p)))) env[k] = v;
  }
  if (env.PATH === undefined) env.PATH = '/usr/local/bin:/usr/bin:/bin';
  const name = user?.name ?? from.USER ?? os.userInfo().username;
  const home = user?.home ?? from.HOME ?? os.userInfo().homedir;
  Object.assign(env, { HOME: home, USER: name, LOGNAME: name });
  return { ...env, ...extra };
}

/**
 * "exited with code 3" or "killed by SIGKILL": the start of a crashed shard's failed
 * reason. Only what happened: a signal is named when there was one, never "(signal none)".
 */
export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal) return `killed by ${signal}`;
  return `exited with code ${code ?? 'none'}`;
}
