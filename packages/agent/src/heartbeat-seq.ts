import fs from 'node:fs';
import path from 'node:path';
import { writePrivateFile } from '@llmgw/shared';

/** Heartbeats one agent process may send before its `seq` could reach the next start's base. */
export const SEQ_PER_RUN = 1_000_000_000;

/** `<state-dir>/heartbeat-seq`: the base of the last start's heartbeat sequence. */
export function seqFile(stateDir: string): string {
  return path.join(stateDir, 'heartbeat-seq');
}

/**
 * Where this start's heartbeat sequence begins (`Heartbeat.seq`): past every `seq` an
 * earlier start of this agent sent, so a server never takes a new heartbeat for an old
 * one. The clock in microseconds, or the last start's base plus `SEQ_PER_RUN` when that
 * is more (a clock set back across a restart), written to the state directory before the
 * first heartbeat. A state directory that cannot be read or written leaves the clock
 * alone to order starts.
 */
export function heartbeatSeqBase(stateDir: string | undefined, nowMs: number = Date.now()): number {
  let base = Math.floor(nowMs) * 1000;
  if (!stateDir) return base;
  try {
    const last = Number(fs.readFileSync(seqFile(stateDir), 'utf8').trim());
    if (Number.isSafeInteger(last) && last + SEQ_PER_RUN > base) base = last + SEQ_PER_RUN;
  } catch {
    /* first start */
  }
  try {
    fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    writePrivateFile(seqFile(stateDir), `${base}\n`);
  } catch {
    /* the clock alone orders this start */
  }
  return base;
}
