// The launcher's children: the server and the agent, each in a process group of its own
// (detached), so that a signal meant for the terminal's group (Ctrl-C, SIGHUP when the
// terminal closes) reaches the launcher alone, and the launcher stops them in order. The
// server would take SIGHUP for "reload the catalog" and keep running; the agent must stop
// its engines, which live in process groups of their own.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Starts `node file ...args` with stdout (JSON logs) going to `log` and stderr (the
 * programs' one-line failures) to `log` and to the terminal as well.
 */
export function startChild({ name, file, args, env, log }) {
  const fd = fs.openSync(log, 'a');
  const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', fd, 'pipe'], env, detached: true });
  fs.closeSync(fd);
  const c = { name, child, log, stderrLines: 0, exited: false, code: null, signal: null };
  c.done = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      Object.assign(c, { exited: true, code, signal });
      resolve();
    });
    // A child that cannot be spawned at all has no exit event, only this.
    child.once('error', (err) => {
      process.stderr.write(`llmgw: cannot start the ${name}: ${err.message}\n`);
      Object.assign(c, { exited: true, code: 1 });
      resolve();
    });
  });
  child.stderr.on('data', (chunk) => {
    c.stderrLines += String(chunk).split('\n').filter(Boolean).length;
    fs.appendFileSync(log, chunk);
    process.stderr.write(chunk);
  });
  return c;
}

/**
 * The last error a child logged (JSON lines on stdout, level >= 50), for a child that
 * failed without a word on stderr (the agent logs a refused join that way).
 */
export function lastLoggedError(log, sinceByte = 0) {
  let text;
  try {
    const fd = fs.openSync(log, 'r');
    const size = fs.fstatSync(fd).size;
    const from = Math.max(sinceByte, size - 64 * 1024);
    const buf = Buffer.alloc(size - from);
    fs.readSync(fd, buf, 0, buf.length, from);
    fs.closeSync(fd);
    text = buf.toString('utf8');
  } catch {
    return undefined;
  }
  let found;
  for (const line of text.split('\n')) {
    try {
      const rec = JSON.parse(line);
      if (rec.level >= 50 && typeof rec.msg === 'string') found = rec.msg;
    } catch {
      // Not a JSON log line.
    }
  }
  return found;
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** /proc/<pid>/stat's start time (field 22), to tell a recorded engine from a reused pid. */
function startTime(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}

/**
 * Kills the engines the agent's state file still records. An agent that stopped cleanly
 * with --stop-engines-on-exit has stopped them already; one that was killed has not.
 * Returns how many groups were signalled.
 */
export function killRecordedEngines(stateDir) {
  let shards;
  try {
    shards = JSON.parse(fs.readFileSync(path.join(stateDir, 'shards.json'), 'utf8')).shards ?? [];
  } catch {
    return 0;
  }
  let n = 0;
  for (const s of shards) {
    // An engine leads its own group, so its pgid is a real pid above 1: a hand-edited or
    // torn record must never reach kill(-1) (every process of this user) or kill(-0)
    // (the launcher's own group, the terminal's job).
    if (!Number.isInteger(s?.pgid) || s.pgid <= 1 || !Number.isInteger(s.pid) || s.pid <= 1) continue;
    const now = startTime(s.pid);
    // The leader gone but its group alive is still the engine's group: Linux does not
    // reuse a pid that names a live group. The leader's pid on another process is not.
    if (now !== undefined && now !== s.start_time) continue;
    signalGroup(s.pgid, 'SIGKILL');
    n++;
  }
  return n;
}

/**
 * SIGTERM to each child's group, SIGKILL to what is left after `graceMs`. Resolves once
 * every child has exited.
 */
export async function stopChildren(children, graceMs) {
  const running = children.filter((c) => c && !c.exited);
  for (const c of running) signalGroup(c.child.pid, 'SIGTERM');
  const timer = new Promise((resolve) => setTimeout(resolve, graceMs).unref());
  await Promise.race([Promise.all(running.map((c) => c.done)), timer]);
  for (const c of running) if (!c.exited) signalGroup(c.child.pid, 'SIGKILL');
  await Promise.all(running.map((c) => c.done));
}
