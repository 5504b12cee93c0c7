/**
 * `/proc/meminfo` parsing. The kernel labels values "kB" but means KiB (cadvisor and
 * Node's `os.totalmem()` both multiply by 1024), so kB / 1024 is MiB.
 */

const MEM_TOTAL = /^MemTotal:\s*(\d+)(?:\s*kB)?\s*$/m;

/**
 * MemTotal from the text of `/proc/meminfo`, in MiB (rounded down).
 * Undefined when the line is absent or not a plain number: unknown is not zero.
 */
export function parseMemTotalMb(text: string): number | undefined {
  const m = MEM_TOTAL.exec(text);
  if (!m) return undefined;
  const kib = Number(m[1]);
  if (!Number.isSafeInteger(kib)) return undefined;
  return Math.floor(kib / 1024);
}
