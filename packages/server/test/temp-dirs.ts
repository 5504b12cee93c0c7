import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Fresh directories under the OS temp dir for one test file, removed by `cleanup`: pass
 * jest's `afterEach` or `afterAll`, whichever matches how long the file uses them.
 */
export function tempDirs(prefix: string, cleanup: (fn: () => void) => void): () => string {
  const dirs: string[] = [];
  cleanup(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
}
