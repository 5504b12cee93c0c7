import fs from 'node:fs';

/** Mode of the agent's own files: engine logs (vLLM logs prompts), shards.json, key files. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of the agent's own folders under the state directory (`logs/`, `keys/`). */
export const PRIVATE_DIR_MODE = 0o700;

/**
 * The state directory itself: 0700, or 0711 when engines run as another user, who must
 * reach the model cache (`models/`) and, under the service, their home below it; 0711
 * lets them through without listing anything. Set with chmod, which no umask touches:
 * an agent started by hand under umask 022 made it 0755 and every log in it 0644.
 */
export function privateStateDir(dir: string, engineUserIsOther: boolean): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  fs.chmodSync(dir, engineUserIsOther ? 0o711 : PRIVATE_DIR_MODE);
}

/** A folder of the agent's own, 0700 whatever the umask (and whatever an older agent left). */
export function privateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  fs.chmodSync(dir, PRIVATE_DIR_MODE);
}

/**
 * Opens `file` for appending, 0600 whatever the umask: `open`'s mode counts only for a
 * new file and only what the umask leaves of it, so the descriptor is chmodded too (a
 * log an older agent made 0644 is closed to others from its next launch on).
 */
export function openPrivateAppend(file: string): number {
  const fd = fs.openSync(file, 'a', PRIVATE_FILE_MODE);
  try {
    fs.fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  return fd;
}
