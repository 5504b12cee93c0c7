import { downloadText } from '@llmgw/shared';
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

const MB = 1_000_000;

/** The event a shard's model file starting, ending or failing to come is recorded as. */
export function downloadEvent(d: DownloadChange): NewEvent {
  const url = shownUrl(d.replica.spec?.file?.url ?? d.replica.spec?.source ?? 'its model file');
  const p = d.progress;
  const took = d.tookMs !== undefined ? `${Math.max(1, Math.round(d.tookMs / 1000))} s` : '';
  const size = p.total_bytes !== undefined ? `${Math.round(p.total_bytes / MB)} MB` : undefined;
  const message =
    d.kind === 'started'
      ? `downloading ${url} to ${d.nodeId}${size ? ` (${size})` : ''}`
      : d.kind === 'finished'
        ? `downloaded ${url} to ${d.nodeId} (${size ? `${size} ` : ''}in about ${took})`
        : `download of ${url} to ${d.nodeId} failed after ${took} (${downloadText(p)}): ${d.error ?? 'the agent gave no reason'}`;
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
