import { bytesText, downloadText, rateText } from '@llmgw/shared';
import type { DownloadChange } from '../controller/downloads.js';
import type { ReportRefusal } from '../controller/options.js';
import type { NewEvent } from './event-log.js';

/** A URL as events show it: no credentials or query (a private store's token may be there). */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return url;
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return url;
  }
}

/** `120 ms`, `9 s`, `4 min`: a small file comes in well under a second. */
function tookText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/** The event a shard's model file starting, ending or failing to come is recorded as. */
export function downloadEvent(d: DownloadChange): NewEvent {
  const url = shownUrl(d.replica.spec?.file?.url ?? d.replica.spec?.source ?? 'its model file');
  const p = d.progress;
  const bytes = d.bytes ?? p?.total_bytes;
  const size = bytes !== undefined ? bytesText(bytes) : undefined;
  // The agent's own count is exact; one seen from heartbeats is within a beat.
  const took = d.tookMs !== undefined ? `${d.bytes !== undefined ? '' : 'about '}${tookText(d.tookMs)}` : undefined;
  const rate = d.bytes !== undefined && d.tookMs ? `, ${rateText((d.bytes * 1000) / d.tookMs)}` : '';
  const message =
    d.kind === 'started'
      ? `downloading ${url} to ${d.nodeId}${size ? ` (${size})` : ''}`
      : d.kind === 'finished'
        ? `downloaded ${url} to ${d.nodeId} (${[size, took && `in ${took}`].filter(Boolean).join(' ') || 'size not known'}${rate})`
        : `download of ${url} to ${d.nodeId} failed${took ? ` after ${took}` : ''}${p ? ` (${downloadText(p)})` : ''}: ${d.error ?? 'the agent gave no reason'}`;
  return {
    type: d.kind === 'failed' ? 'Warning' : 'Normal',
    source: 'reconciler',
    reason: d.kind === 'started' ? 'download-started' : d.kind === 'finished' ? 'download-done' : 'download-failed',
    object: `replica/${d.replica.id}`,
    nodes: [d.nodeId],
    model: d.replica.model,
    message,
  };
}

/** A node's heartbeat refused for its size (issue 27): said when it starts, not at every beat. */
export function reportRefusedEvent(r: ReportRefusal): NewEvent {
  const what = r.part === 'report' ? 'report' : 'heartbeat';
  const size = r.bytes !== undefined ? `${r.bytes} bytes` : 'larger';
  return {
    type: 'Warning',
    source: 'reconciler',
    reason: 'report-refused',
    object: `node/${r.nodeId}`,
    nodes: [r.nodeId],
    message: `refused the ${what} of ${r.nodeId} (${size}, over the cap of ${r.limit} bytes): its last report within the cap stays in force until it sends a smaller one`,
  };
}
