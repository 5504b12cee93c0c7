import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { redactSecrets } from '@llmgw/shared';
import { openPrivateAppend, privateDir } from './private-files.js';

/** Starts the agent's line before each launch; the failed reason shows only what follows the last one. */
export const LAUNCH_MARK = '=== llmgw-agent ';
const LOG_TAIL_LINES = 10;
const LOG_LINE_MAX = 500;

/** `<stateDir>/logs/<shard>.log`. */
export function logPath(stateDir: string, id: string): string {
  return path.join(stateDir, 'logs', `${safeName(id)}.log`);
}

/** Shard ids are server-chosen strings; never let one walk out of the logs directory. */
function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
}

/**
 * Appends the launch mark with the command line, the shard's API key masked. The log
 * and its folder are the agent's alone (0600 in 0700), whatever the umask: engines log
 * prompts (vLLM at debug level, llama.cpp's verbose mode) and their settings.
 */
export function writeLaunchMark(file: string, shardId: string, restarts: number, argv: readonly string[], secret: string | undefined): void {
  privateDir(path.dirname(file));
  const shown = redactSecrets(argv.join(' '), [secret]);
  const fd = openPrivateAppend(file);
  try {
    fs.writeSync(fd, `\n${LAUNCH_MARK}${new Date().toISOString()} launch #${restarts} of shard ${shardId}: ${shown}\n`);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The last `maxBytes` of a file, from a line start; '' when it cannot be read. A window
 * with no newline in it (a progress bar redrawn in place with `\r` for a long while)
 * starts after its first `\r` instead, so that it never begins mid-redraw.
 */
export function readTail(file: string, maxBytes: number): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const len = Math.min(size, maxBytes);
      const buf = Buffer.alloc(len);
      fs.readSync(fd, buf, 0, len, size - len);
      const text = buf.toString('utf8');
      if (len === size) return text;
      const nl = text.indexOf('\n');
      return text.slice((nl === -1 ? text.indexOf('\r') : nl) + 1);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * The last lines the current run of the engine wrote (after the agent's launch mark), for
 * a failed reason, with the shard's key masked before lines are cut short (a cut key
 * would no longer match): engines print their settings at start, vLLM its key among them.
 */
export function lastLogLines(file: string, secret: string | undefined): string {
  return lastRunLines(redactSecrets(readTail(file, 64 * 1024), [secret]));
}

/** The pure half of {@link lastLogLines}: non-blank lines after the last launch mark, each cut short. */
export function lastRunLines(text: string): string {
  if (!text) return '';
  const mark = text.lastIndexOf(LAUNCH_MARK);
  const run = mark === -1 ? text : text.slice(text.indexOf('\n', mark) + 1);
  return run
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-LOG_TAIL_LINES)
    .map((l) => (l.length > LOG_LINE_MAX ? `${l.slice(0, LOG_LINE_MAX)}…` : l))
    .join('\n');
}

/**
 * Keeps the last half of a log that outgrew `maxBytes`, in place: the engine holds
 * an O_APPEND descriptor to this inode, so its next write lands at the new end.
 * Output written during the rewrite may be lost; a bounded disk is worth that.
 */
export async function boundLog(file: string, maxBytes: number, log: Logger): Promise<void> {
  try {
    const { size } = await fsp.stat(file);
    if (size <= maxBytes) return;
    const keep = Math.floor(maxBytes / 2);
    const fh = await fsp.open(file, 'r+');
    try {
      const buf = Buffer.alloc(keep);
      const { bytesRead } = await fh.read(buf, 0, keep, size - keep);
      const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
      const body = buf.subarray(nl === -1 ? 0 : nl + 1, bytesRead);
      const note = Buffer.from(`--- llmgw-agent: earlier output dropped to keep this log under ${maxBytes} bytes\n`);
      const out = Buffer.concat([note, body]);
      await fh.write(out, 0, out.length, 0);
      await fh.truncate(out.length);
    } finally {
      await fh.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err, file }, 'cannot bound engine log');
  }
}
