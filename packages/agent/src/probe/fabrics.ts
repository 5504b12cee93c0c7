import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * RDMA fabrics from sysfs (Documentation/ABI/stable/sysfs-class-infiniband). Reading
 * sysfs needs no tools (no infiniband-diags) and no privileges.
 */

/**
 * True for a port `state` of `4: ACTIVE`. INIT (no subnet manager) and DOWN carry no
 * traffic; ACTIVE_DEFER (a port that cannot send for now) does not match either.
 */
export function isActivePortState(state: string): boolean {
  return /\bACTIVE\b/i.test(state);
}

/**
 * The fabric a port provides, from its `link_layer` (`InfiniBand` or `Ethernet`,
 * the latter being RoCE), or undefined when the port is not active or the link layer
 * is unknown.
 */
export function portFabric(state: string, linkLayer: string): string | undefined {
  if (!isActivePortState(state)) return undefined;
  switch (linkLayer.trim().toLowerCase()) {
    case 'infiniband':
      return 'infiniband';
    case 'ethernet':
      return 'roce';
    default:
      return undefined;
  }
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Fabrics from the active ports under `<sysRoot>/class/infiniband/<dev>/ports/<n>/`,
 * deduplicated and sorted. A missing directory (no RDMA hardware) gives [].
 */
export async function readFabrics(sysRoot: string): Promise<string[]> {
  const base = path.join(sysRoot, 'class', 'infiniband');
  const found = new Set<string>();
  for (const dev of await listDir(base)) {
    const portsDir = path.join(base, dev, 'ports');
    for (const port of await listDir(portsDir)) {
      const [state, linkLayer] = await Promise.all([readText(path.join(portsDir, port, 'state')), readText(path.join(portsDir, port, 'link_layer'))]);
      if (state === undefined || linkLayer === undefined) continue;
      const fabric = portFabric(state, linkLayer);
      if (fabric !== undefined) found.add(fabric);
    }
  }
  return [...found].sort();
}
