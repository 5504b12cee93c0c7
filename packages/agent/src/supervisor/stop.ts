import type { Logger } from 'pino';
import { groupExists, readProcStat, signalGroup } from '../proc.js';
import type { RunningProcess } from './spawn.js';

/** After SIGKILL a group normally vanishes at once; do not wait forever on an unreaped zombie. */
const KILL_WAIT_MS = 5_000;

/** Signals an engine's process group, logging instead of throwing: a stop must go on. */
export function killGroupQuietly(pgid: number, signal: NodeJS.Signals, log: Logger): void {
  try {
    signalGroup(pgid, signal);
  } catch (err) {
    log.warn({ err, pgid }, `cannot send ${signal} to engine process group`);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitGroupGone(pgid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (groupExists(pgid)) {
    if (Date.now() >= until) return false;
    await sleep(50);
  }
  return true;
}

/**
 * SIGTERM to the group, SIGKILL after the grace period; resolves when the group is gone.
 * If the leader's pid now belongs to another process (same pid, other start time) the
 * group id may be a stranger's, so nothing is signalled. A gone leader with a surviving
 * group is safe to signal: Linux does not reuse a pid while it names a live group.
 */
export async function stopGroup(p: RunningProcess, graceMs: number, log: Logger): Promise<void> {
  const stat = readProcStat(p.pid);
  if (stat && stat.startTime !== p.startTime) return;
  killGroupQuietly(p.pgid, 'SIGTERM', log);
  if (await waitGroupGone(p.pgid, graceMs)) return;
  log.warn({ pgid: p.pgid }, 'engine ignored SIGTERM; sending SIGKILL');
  killGroupQuietly(p.pgid, 'SIGKILL', log);
  if (!(await waitGroupGone(p.pgid, KILL_WAIT_MS))) log.error({ pgid: p.pgid }, 'engine process group survived SIGKILL');
}
