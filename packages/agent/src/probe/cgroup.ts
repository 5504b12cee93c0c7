import { readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * cgroup memory limits. Engines are children of the agent and stay in its cgroup, so
 * a `MemoryMax=` on the agent's unit (or a container limit) caps everything the node
 * can run: the capacity we report must not exceed it.
 */

/** Where this process sits in each hierarchy that can carry a memory limit. */
export interface CgroupPaths {
  /** Path in the unified (v2) hierarchy, from the `0::<path>` line. */
  v2?: string;
  /** Path in the v1 memory controller's hierarchy, from the `N:...memory...:<path>` line. */
  v1Memory?: string;
}

/**
 * v1 prints "no limit" as the largest page-aligned signed 64-bit value. Anything at
 * or above it is unlimited; compared as bigint because it is beyond 2^53.
 */
export const V1_UNLIMITED_BYTES = 9223372036854771712n;

/**
 * Parses `/proc/self/cgroup`. Hybrid hosts list both a `0::` line and v1 controller
 * lines; both are returned so the caller can look in either tree.
 */
export function parseProcCgroup(text: string): CgroupPaths {
  const out: CgroupPaths = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    // The path may itself contain ':', so split only on the first two.
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const id = line.slice(0, first);
    const controllers = line.slice(first + 1, second);
    const cgPath = line.slice(second + 1);
    if (!cgPath.startsWith('/')) continue;
    if (id === '0' && controllers === '') {
      out.v2 ??= cgPath;
    } else if (controllers.split(',').includes('memory')) {
      out.v1Memory ??= cgPath;
    }
  }
  return out;
}

/**
 * Parses a cgroup v2 `memory.max` or a v1 `memory.limit_in_bytes` value into bytes.
 * Undefined means no limit: the literal `max`, the v1 sentinel (or larger), or text
 * that is not a byte count.
 */
export function parseMemoryLimitBytes(text: string): number | undefined {
  const value = text.trim();
  if (!/^\d+$/.test(value)) return undefined;
  if (BigInt(value) >= V1_UNLIMITED_BYTES) return undefined;
  return Number(value);
}

/**
 * The path and every ancestor up to the root, deepest first: the effective limit is
 * the smallest along the chain, and a parent slice can be tighter than the unit.
 */
export function cgroupAncestors(cgPath: string): string[] {
  const normal = path.posix.normalize(`/${cgPath}`);
  const out: string[] = [];
  let cur = normal.length > 1 && normal.endsWith('/') ? normal.slice(0, -1) : normal;
  for (;;) {
    out.push(cur);
    if (cur === '/') break;
    cur = path.posix.dirname(cur);
  }
  return out;
}

/** The smallest defined value, or undefined when there is none. */
export function minDefined(values: ReadonlyArray<number | undefined>): number | undefined {
  let best: number | undefined;
  for (const v of values) {
    if (v !== undefined && (best === undefined || v < best)) best = v;
  }
  return best;
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    // Missing or unreadable means no limit set at this level (the real v2 root has
    // no memory.max at all).
    return undefined;
  }
}

async function limitAlong(base: string, cgPath: string, file: string): Promise<number | undefined> {
  const texts = await Promise.all(cgroupAncestors(cgPath).map((p) => readOptional(path.join(base, p, file))));
  return minDefined(texts.map((t) => (t === undefined ? undefined : parseMemoryLimitBytes(t))));
}

/**
 * The effective cgroup memory limit of this process in MiB (rounded down), or
 * undefined when there is none. Reads `<procRoot>/self/cgroup`, then `memory.max`
 * under `<sysRoot>/fs/cgroup/<path>` (v2) and `memory.limit_in_bytes` under
 * `<sysRoot>/fs/cgroup/memory/<path>` (v1) for the path and all its ancestors, and
 * takes the minimum. Missing files mean no limit.
 */
export async function readCgroupLimitMb(procRoot: string, sysRoot: string): Promise<number | undefined> {
  const text = await readOptional(path.join(procRoot, 'self', 'cgroup'));
  if (text === undefined) return undefined;
  const paths = parseProcCgroup(text);
  const cgRoot = path.join(sysRoot, 'fs', 'cgroup');
  const limits = await Promise.all([
    paths.v2 === undefined ? undefined : limitAlong(cgRoot, paths.v2, 'memory.max'),
    paths.v1Memory === undefined ? undefined : limitAlong(path.join(cgRoot, 'memory'), paths.v1Memory, 'memory.limit_in_bytes'),
  ]);
  const bytes = minDefined(limits);
  return bytes === undefined ? undefined : Math.floor(bytes / (1024 * 1024));
}
