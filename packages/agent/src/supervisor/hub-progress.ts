import type { DownloadProgress } from '@llmgw/shared';
import { LAUNCH_MARK } from './logs.js';

/**
 * Reading a hub download's progress out of an engine's log (best effort).
 *
 * vLLM and SGLang fetch a hub id through huggingface_hub, whose tqdm bars land in the
 * engine's log as tqdm draws them, redrawn in place with `\r`:
 *
 *   model-00001-of-00004.safetensors:  45%|████▌     | 2.24G/4.97G [00:30<00:36, 75.2MB/s]
 *
 * Only bars that count bytes are understood: tqdm appends the unit to the rate, so a
 * rate in `B/s` (or `s/B`, tqdm's inverse form while slower than one a second, or `?B/s`
 * before the first rate) marks a byte bar; sizes are tqdm's unit_scale, decimal
 * (k = 1000), with or without a `B`. Count bars (`Downloading shards: 2/4 [… 31.2s/it]`,
 * `Fetching 12 files: 4/12`, `Loading safetensors checkpoint shards`) are ignored, even
 * when no byte bar exists: the wire carries bytes, and a count of shards of unknown size
 * says nothing about them. So are bars without a total (no percentage): nothing in them
 * tells a finished one from a running one. Anything else in the log is skipped.
 */

/** One redraw of a byte bar: its label (tqdm's desc), bytes so far and in all, bytes per second. */
export interface ByteBar {
  label: string;
  done: number;
  total: number;
  rate: number;
}

const SCALE = 'kMGTPEZY';
/** tqdm's `{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]`. */
const BAR =
  /^(?:(?<label>.*?):\s*)?\d{1,3}%\|[^|]*\|\s*(?<n>\d+(?:\.\d+)?)(?<nu>[kKMGTPEZY]?)B?\/(?<t>\d+(?:\.\d+)?)(?<tu>[kKMGTPEZY]?)B?\s*\[[^\],]*,\s*(?<rate>[^\],]*)/;
/** `75.2MB/s`, `?B/s`; `1.50s/B` is the inverse form. */
const BYTE_RATE = /^(?<v>\d+(?:\.\d+)?|\?)(?<u>[kKMGTPEZY]?)B\/s$/;
const INVERSE_BYTE_RATE = /^(?<v>\d+(?:\.\d+)?)s\/B$/;
/** Cursor moves tqdm writes between the rows of several bars at once. */
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

function scaled(value: string, prefix: string | undefined): number {
  const i = prefix ? SCALE.indexOf(prefix === 'K' ? 'k' : prefix) : -1;
  return Number(value) * 1000 ** (i + 1);
}

/** Bytes per second from tqdm's rate text; undefined when the bar does not count bytes. */
function byteRate(text: string): number | undefined {
  const r = BYTE_RATE.exec(text.trim());
  if (r?.groups) return r.groups.v === '?' ? 0 : scaled(r.groups.v ?? '0', r.groups.u);
  const inv = INVERSE_BYTE_RATE.exec(text.trim());
  if (inv?.groups) return Number(inv.groups.v) > 0 ? 1 / Number(inv.groups.v) : 0;
  return undefined;
}

/** One segment of a log (between `\r`/`\n`) as a byte bar, or undefined when it is none. */
export function parseByteBar(segment: string): ByteBar | undefined {
  const m = BAR.exec(segment.replace(ANSI, '').trim());
  if (!m?.groups) return undefined;
  const g = m.groups;
  const rate = byteRate(g.rate ?? '');
  if (rate === undefined) return undefined;
  return { label: (g.label ?? '').trim(), done: scaled(g.n ?? '0', g.nu), total: scaled(g.t ?? '0', g.tu), rate };
}

/**
 * The download the end of an engine's log shows under way, or undefined when it shows
 * none (no byte bar, every bar finished, or only output llmgw does not understand).
 * Only the engine's current run counts: what follows the agent's last launch mark. Each
 * bar's latest redraw wins; the bars not yet at their total (huggingface_hub fetches
 * several files at once) are summed, so the progress is that of the files in flight.
 */
export function hubProgress(logTail: string): DownloadProgress | undefined {
  const mark = logTail.lastIndexOf(LAUNCH_MARK);
  const run = mark === -1 ? logTail : logTail.slice(mark);
  const latest = new Map<string, ByteBar>();
  for (const segment of run.split(/[\r\n]+/)) {
    const bar = parseByteBar(segment);
    if (bar) latest.set(bar.label, bar);
  }
  const open = [...latest.values()].filter((b) => b.total > 0 && b.done < b.total);
  if (open.length === 0) return undefined;
  const sum = (f: (b: ByteBar) => number) => Math.round(open.reduce((acc, b) => acc + f(b), 0));
  return { done_bytes: sum((b) => b.done), total_bytes: sum((b) => b.total), bytes_per_s: sum((b) => b.rate) };
}
