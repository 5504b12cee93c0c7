import { readFileSync } from 'node:fs';

/**
 * Process facts from the real /proc. Deliberately not configurable: probe tests point a
 * "proc root" at fixtures, but a pid identity check against fixture files could make the
 * agent adopt — and later kill — an unrelated process that reused an engine's pid.
 */
const PROC = '/proc';

/** The parts of `/proc/<pid>/stat` the supervisor needs. */
export interface ProcStat {
  /** One letter: R, S, D, Z (zombie), X (dead), … */
  state: string;
  pgrp: number;
  /** Field 22: clock ticks after boot at which the process started; with the pid, a unique identity. */
  startTime: number;
}

/** Parses a stat line; the command name (field 2) may hold spaces and parentheses, so split after the last ')'. */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  if (close === -1) return null;
  const fields = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // fields[0] is field 3 of stat(5), so field n is fields[n - 3].
  const state = fields[0];
  const pgrp = Number(fields[2]);
  const startTime = Number(fields[19]);
  if (!state || !Number.isInteger(pgrp) || !Number.isInteger(startTime)) return null;
  return { state, pgrp, startTime };
}

/** Null when the process does not exist (or /proc cannot be read). */
export function readProcStat(pid: number): ProcStat | null {
  try {
    return parseProcStat(readFileSync(`${PROC}/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/**
 * True when `pid` is still the very process that started at `startTime` and has not
 * exited. A zombie counts as gone: it has exited, it only waits for its parent to reap it.
 */
export function isSameProcess(pid: number, startTime: number): boolean {
  const stat = readProcStat(pid);
  return stat !== null && stat.startTime === startTime && stat.state !== 'Z' && stat.state !== 'X';
}

/** Whether any process is left in group `pgid` (EPERM means one exists that we may not signal). */
export function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Signals a whole process group; a group that is already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
