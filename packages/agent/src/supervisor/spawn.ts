import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { readProcStat } from '../proc.js';

/** Engines must not see the agent's own credential. */
const PRIVATE_ENV = ['LLMGW_JOIN_TOKEN'];

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
export function spawnEngine(argv: readonly string[], env: Record<string, string>, logFile: string, on: SpawnCallbacks): RunningProcess | undefined {
  const [bin = '', ...args] = argv;
  const fd = fs.openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd], env: engineEnvironment(env) });
  } finally {
    fs.closeSync(fd);
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

/** The agent's environment plus the command's, minus the agent's secrets. */
export function engineEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const k of PRIVATE_ENV) delete env[k];
  return env;
}

/** "exited with code 3 (signal none)": the start of a crashed shard's failed reason. */
export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return `exited with code ${code ?? 'none'} (signal ${signal ?? 'none'})`;
}
