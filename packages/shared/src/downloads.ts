import type { DownloadProgress } from './agent.js';

/** Decimal megabytes, as download tools and file servers count them. */
const MB = 1_000_000;

function mb(bytes: number): string {
  const v = bytes / MB;
  return v >= 10 || v === 0 ? String(Math.round(v)) : v.toFixed(1);
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
  const rate = d.bytes_per_s > 0 ? `${mb(d.bytes_per_s)} MB/s` : 'stalled';
  if (d.total_bytes === undefined || d.total_bytes <= 0) return `downloading ${mb(d.done_bytes)} MB (${rate})`;
  const done = Math.min(d.done_bytes, d.total_bytes);
  const pct = Math.floor((done / d.total_bytes) * 100);
  const left = d.bytes_per_s > 0 && done < d.total_bytes ? `, ${duration((d.total_bytes - done) / d.bytes_per_s)} left` : '';
  return `downloading ${pct}% (${mb(done)} of ${mb(d.total_bytes)} MB, ${rate}${left})`;
}
