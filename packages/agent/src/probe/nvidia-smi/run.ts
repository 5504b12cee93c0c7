import { execFile } from 'node:child_process';

/** nvidia-smi exit codes (man page, "RETURN VALUE"). */
export const NVIDIA_SMI_EXIT_CODES: Readonly<Record<number, string>> = {
  0: 'success',
  2: 'invalid argument',
  3: 'not available on this device',
  4: 'no permission',
  6: 'object not found',
  8: 'power cables not attached',
  9: 'driver not loaded',
  10: 'IRQ issue',
  12: 'NVML library not found',
  13: 'function not implemented',
  14: 'infoROM corrupted',
  15: 'GPU has fallen off the bus or is otherwise inaccessible',
  255: 'other error',
};

/** "exit 9: driver not loaded", or just "exit 42" for a code without a documented meaning. */
export function describeExit(code: number): string {
  const meaning = NVIDIA_SMI_EXIT_CODES[code];
  return meaning === undefined ? `exit ${code}` : `exit ${code}: ${meaning}`;
}

/** How one nvidia-smi invocation ended. */
export type RunOutcome =
  { kind: 'exited'; stdout: string; stderr: string; exitCode: number } | { kind: 'missing' } | { kind: 'timeout' } | { kind: 'failed'; message: string };

/** Extra wait after the kill before giving up on the callback. */
const KILL_GRACE_MS = 2000;

/**
 * Runs a command and reports how it ended, never rejecting. NVML can hang on a wedged
 * GPU in uninterruptible sleep, where even SIGKILL does not end the process and
 * execFile's callback never comes; a timer of our own bounds the wait regardless.
 */
export function runCommand(file: string, args: readonly string[], timeoutMs: number): Promise<RunOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: RunOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(backstop);
      resolve(outcome);
    };
    const backstop = setTimeout(() => settle({ kind: 'timeout' }), timeoutMs + KILL_GRACE_MS);
    try {
      execFile(
        file,
        [...args],
        { timeout: timeoutMs, killSignal: 'SIGKILL', encoding: 'utf8', maxBuffer: 8 * 1024 * 1024, windowsHide: true },
        (err, stdout, stderr) => {
          if (!err) return settle({ kind: 'exited', stdout, stderr, exitCode: 0 });
          const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: NodeJS.Signals | null };
          if (e.code === 'ENOENT') return settle({ kind: 'missing' });
          if (e.killed) return settle({ kind: 'timeout' });
          if (typeof e.code === 'number') return settle({ kind: 'exited', stdout, stderr, exitCode: e.code });
          if (e.signal) return settle({ kind: 'failed', message: `nvidia-smi was killed by ${e.signal}` });
          return settle({ kind: 'failed', message: `nvidia-smi could not be run: ${e.code ?? e.message}` });
        },
      );
    } catch (err) {
      settle({ kind: 'failed', message: `nvidia-smi could not be run: ${(err as Error).message}` });
    }
  });
}
