/** Reading single cells: nvidia-smi's placeholders for "no value", counts, bus ids. */

/** True for the sentinels nvidia-smi prints instead of a value: `[N/A]`, `[Unknown Error]`, `N/A`. */
export function isUnknownValue(value: string): boolean {
  const v = value.trim();
  return v === '' || v === 'N/A' || /^\[.*\]$/.test(v);
}

/** A cell's text, or undefined for one of nvidia-smi's placeholders. */
export function knownString(value: string | undefined): string | undefined {
  if (value === undefined || isUnknownValue(value)) return undefined;
  return value.trim();
}

/** A non-negative integer, tolerating a `MiB` unit in case `nounits` was dropped. */
export function knownCount(value: string | undefined): number | undefined {
  const v = knownString(value);
  if (v === undefined) return undefined;
  const m = /^(\d+)(?:\s*MiB)?$/.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Bus ids come as `00000000:18:00.0` from the query and as `0000:18:00.0` in error
 * lines; one form (8-digit domain, upper case) lets them be matched.
 */
export function normaliseBusId(busId: string): string {
  const m = /^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.([0-9A-Fa-f]))?$/.exec(busId.trim());
  if (!m) return busId.trim();
  const [, domain = '', bus, device, fn] = m;
  return `${domain.padStart(8, '0')}:${bus}:${device}.${fn ?? '0'}`.toUpperCase();
}
