import type { Command } from 'commander';
import { call, type Connection } from './client.js';
import { safeJson, terminalSafe } from './text.js';
import { examplesText } from './usage.js';

type Globals = () => { conn: Connection; json: boolean };

const out = (text: string): void => {
  process.stdout.write(`${terminalSafe(text, process.stdout.isTTY === true)}\n`);
};
const json = (v: unknown): void => {
  process.stdout.write(`${safeJson(v, 2)}\n`);
};

/**
 * Who is in the fleet (issue 12): `ctl nodes delete`, `ctl nodes approve` under the
 * `nodes` command, and `ctl join-token rotate`. Errors are the server's one line, with
 * the exit code of any refused request (failure.ts).
 */
export function addMembershipCommands(program: Command, nodes: Command, globals: Globals): void {
  nodes
    .command('delete <node>')
    .description('forget a node and its credential, freeing its id for the next join (refused while it holds replicas)')
    .option('--force', 'delete even while it holds replicas: they are dropped and placed elsewhere')
    .addHelpText('after', examplesText('ctl nodes delete gpu-3', 'ctl nodes delete gpu-3 --force   # its replicas are placed elsewhere'))
    .action(async (node: string, o: { force?: boolean }) => {
      const g = globals();
      const res = await call<{ id: string; replicas_dropped: number }>(g.conn, 'DELETE', `/nodes/${encodeURIComponent(node)}${o.force ? '?force=true' : ''}`);
      if (g.json) return json(res);
      out(`node/${res.id} deleted${res.replicas_dropped ? `; ${res.replicas_dropped} replica(s) dropped, to be placed elsewhere` : ''}`);
    });

  nodes
    .command('approve <node>')
    .description('let a node waiting as pending-approval (--join-approval manual) take work')
    .addHelpText('after', examplesText('ctl nodes approve gpu-4'))
    .action(async (node: string) => {
      const g = globals();
      const res = await call<{ id: string; state: string }>(g.conn, 'POST', `/nodes/${encodeURIComponent(node)}/approve`);
      if (g.json) return json(res);
      out(`node/${res.id} approved`);
    });

  program
    .command('join-token')
    .description('the token agents join with')
    .command('rotate')
    .description('replace the join token: joined nodes keep working with their own credentials, the old token stops joining')
    .addHelpText('after', examplesText('TOKEN=$(ctl join-token rotate)'))
    .action(async () => {
      const g = globals();
      const res = await call<{ token: string }>(g.conn, 'POST', '/join-token/rotate');
      if (g.json) return json(res);
      // The token alone on stdout, for TOKEN=$(ctl join-token rotate); the note on stderr.
      out(res.token);
      process.stderr.write('join token rotated: joined nodes keep working; agents that join from now on need this token (LLMGW_JOIN_TOKEN)\n');
    });
}
