import type { Command } from 'commander';
import type { NodeFileView } from '@llmgw/shared';
import { call } from './client.js';
import { table } from './render.js';
import type { Io } from './tokens-cmd.js';
import { examplesText } from './usage.js';

/** Sizes as `du -h` would say them, in binary units: model files run to tens of GiB. */
export function sizeText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/** The files table: per node, least recently used first (the order they are evicted in). */
export function filesTable(files: NodeFileView[], now: Date): string {
  if (files.length === 0) return 'No model files cached. Agents fetch http(s):// and llmgw:// sources into their --model-cache when a replica needs one.';
  return table(
    ['NODE', 'SHA256', 'SIZE', 'LAST USED', 'IN USE', 'SOURCE'],
    files.map((f) => [f.node, f.sha256.slice(0, 12), sizeText(f.size_bytes), ago(f.last_used, now), f.in_use ? 'yes' : 'no', f.source]),
  );
}

function ago(time: string, now: Date): string {
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(time)) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.floor(s / 60)}m ago`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** `ctl files [--node N]`: the model files in each node's cache, from the agents' reports. */
export function addFilesCommand(program: Command, io: Io): void {
  program
    .command('files')
    .description("list the model files in each node's cache (size, last use, in use), least recently used first")
    .option('--node <node>', 'only this node')
    .addHelpText('after', examplesText('ctl files', 'ctl files --node cpu-3', "ctl files -o json | jq '.[] | select(.in_use | not)'"))
    .action(async (o: { node?: string }) => {
      const { conn, json } = io.globals();
      const files = await call<NodeFileView[]>(conn, 'GET', `/files${o.node ? `?node=${encodeURIComponent(o.node)}` : ''}`);
      if (json) return io.printJson(files);
      io.print(filesTable(files, new Date()));
    });
}
