// What a launcher killed without a chance to stop its children (SIGKILL, a crash, an
// OOM kill) leaves running: the server and the agent live in process groups of their own
// (children.mjs), so they outlive it, still holding the ports, the store and the engines.
// The lock names them (server_pid, agent_pid); the next `pnpm start` or `pnpm stop` ends
// them instead of failing on EADDRINUSE or saying "not running" while they serve.
import fs from 'node:fs';
import path from 'node:path';
import { alive } from './lock.mjs';
import { killRecordedEngines } from './children.mjs';

/**
 * The children a stale lock record names that still run, as [{ name, pid }]. A pid
 * counts only while its command line names this LLMGW_HOME (every child's does: its data
 * or state directory), so a pid reused by another program is never touched.
 */
export function leftovers(home, record) {
  const found = [];
  for (const name of ['server', 'agent']) {
    const pid = record?.[`${name}_pid`];
    // Never kill(-1) or kill(-0): only a real group leader's pid.
    if (!Number.isInteger(pid) || pid <= 1 || !alive(pid)) continue;
    let cmdline;
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.split('\0').some((arg) => arg === home || arg.startsWith(`${home}${path.sep}`))) found.push({ name, pid });
  }
  return found;
}

/** `server (pid 12), agent (pid 13)`: the leftovers named in a line. */
export function describeLeftovers(left) {
  return left.map((c) => `${c.name} (pid ${c.pid})`).join(', ');
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // Gone already.
  }
}

/**
 * Stops `left` as the launcher would have: SIGTERM to each group (the agent stops its
 * engines), SIGKILL to what is left after `graceMs`, then the engines the agent's state
 * still records. Resolves once none of them runs.
 */
export async function stopLeftovers(home, left, graceMs) {
  for (const c of left) signalGroup(c.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (left.some((c) => alive(c.pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const c of left) if (alive(c.pid)) signalGroup(c.pid, 'SIGKILL');
  while (left.some((c) => alive(c.pid))) await new Promise((r) => setTimeout(r, 20));
  killRecordedEngines(path.join(home, 'agent'));
}
