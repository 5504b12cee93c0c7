import type { DownloadProgress } from './agent.js';

/**
 * Decimal units, as download tools and file servers count them; a size is shown in the
 * largest unit it fills, so a small or slow file reads `512 KB` or `40 KB/s`, not `0 MB`.
 */
const UNITS = [
  ['GB', 1e9],
  ['MB', 1e6],
  ['KB', 1e3],
] as const;

function unitOf(bytes: number): readonly [string, number] {
  return UNITS.find(([, size]) => bytes >= size) ?? ['B', 1];
}

/** `bytes` in the unit `size`: one decimal below 10 (`1.2`), whole above (`466`). */
function inUnit(bytes: number, size: number): string {
  const v = bytes / size;
  if (size === 1 || v === 0) return String(Math.round(v));
  // 9.96 rounds to 10.0: whole from there on, like any figure of 10 or more.
  return v >= 9.95 ? String(Math.round(v)) : v.toFixed(1);
}

/** A size in the unit that fits it: `512 B`, `512 KB`, `1.2 MB`, `466 MB`, `3.4 GB`. */
export function bytesText(bytes: number): string {
  const [unit, size] = unitOf(bytes);
  return `${inUnit(bytes, size)} ${unit}`;
}

/** A transfer rate the same way: `40 KB/s`, `2.5 MB/s`. */
export function rateText(bytesPerS: number): string {
  return `${bytesText(bytesPerS)}/s`;
}

/** `210 of 466 MB` when both fit one unit (nothing yet counts as the total's), else `512 KB of 3.4 GB`. */
function partText(done: number, total: number): string {
  const [unit, size] = unitOf(total);
  return done === 0 || unitOf(done)[0] === unit ? `${inUnit(done, size)} of ${inUnit(total, size)} ${unit}` : `${bytesText(done)} of ${bytesText(total)}`;
}

function duration(s: number): string {
  if (s < 60) return `${Math.ceil(s)} s`;
  if (s < 3600) return `${Math.ceil(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${Math.ceil((s % 3600) / 60)} min`;
}

/**
 * A model file on its way, in the one wording of ctl, the dashboard and the events:
 * `downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)`; without a total (no
 * Content-Length) `downloading 210 MB (30 MB/s)`; `stalled` while nothing arrives.
 */
export function downloadText(d: DownloadProgress): string {
  const rate = d.bytes_per_s > 0 ? rateText(d.bytes_per_s) : 'stalled';
  if (d.total_bytes === undefined || d.total_bytes <= 0) return `downloading ${bytesText(d.done_bytes)} (${rate})`;
  const done = Math.min(d.done_bytes, d.total_bytes);
  const pct = Math.floor((done / d.total_bytes) * 100);
  const left = d.bytes_per_s > 0 && done < d.total_bytes ? `, ${duration((d.total_bytes - done) / d.bytes_per_s)} left` : '';
  return `downloading ${pct}% (${partText(done, d.total_bytes)}, ${rate}${left})`;
}
