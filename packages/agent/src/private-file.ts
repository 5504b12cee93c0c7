import fs from 'node:fs';
import path from 'node:path';

/**
 * Writes a file only the agent's user may read (engine state with API keys, the node
 * credential), whole or not at all: the text goes to a temporary file beside it, renamed
 * over it, so a crash never leaves half a file. The folder must exist.
 */
export function writePrivateFile(file: string, text: string): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, text, { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}
