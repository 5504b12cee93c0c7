import type { Command } from 'commander';
import type { NodeFileView } from '@llmgw/shared';
import { call } from './client.js';
import type { Io } from './tokens-cmd.js';
import { examplesText } from './usage.js';

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
      const { filesTable } = await import('./tables.js');
      io.print(filesTable(files, new Date()));
    });
}
