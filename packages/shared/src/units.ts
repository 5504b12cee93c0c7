/**
 * Sizes are carried in MiB on the wire and shown in GiB, labelled so ("has 8 GiB
 * of memory, needs 24"); the catalog's and views' `*_gb` fields are GiB too. One rule for rounding, shared by the server's
 * messages and ctl's tables, so the two never print different figures.
 */
export function mbToGb(mb: number): number {
  return Math.round((mb / 1024) * 10) / 10;
}

export function gbToMb(gb: number): number {
  return Math.round(gb * 1024);
}

/** `8`, `23.5`: no trailing `.0`. */
export function formatGb(mb: number): string {
  const gb = mbToGb(mb);
  return Number.isInteger(gb) ? String(gb) : gb.toFixed(1);
}
