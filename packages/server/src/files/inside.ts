import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * The real path of `name` in `root` when it is a file that stays inside `root` once every
 * symlink is followed, else undefined (missing, a directory, or a link leading out).
 * `send` refuses `..` in a name but follows links: a `tiny.gguf -> /etc/hostname` put in
 * --models-dir (a careless copy, an unpacked archive) would hand that file to any node
 * credential. A link to another file of the directory is fine. What is served is the
 * real path, so a link swapped in after this check is not followed by the transfer's
 * own lookup of the name.
 */
export async function fileInside(root: string, name: string): Promise<string | undefined> {
  let realRoot: string;
  let real: string;
  try {
    realRoot = await fs.realpath(root);
    real = await fs.realpath(path.join(realRoot, name));
  } catch {
    return undefined;
  }
  const rel = path.relative(realRoot, real);
  if (rel === '' || rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return undefined;
  try {
    return (await fs.stat(real)).isFile() ? real : undefined;
  } catch {
    return undefined;
  }
}
