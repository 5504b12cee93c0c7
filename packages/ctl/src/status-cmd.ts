import type { Command } from 'commander';
import type { StatusView } from '@llmgw/shared';
import { call } from './client.js';
import { CtlError, refusedWith } from './failure.js';
import type { Io } from './tokens-cmd.js';
import { examples } from './usage.js';

/** `ctl status`: the store, the server instances on it and the leader among them (GET /api/v1/status). */
export function addStatusCommand(program: Command, io: Io): void {
  examples(
    program
      .command('status')
      .description('show the store, the server instances on it and which one leads, since when (GET /api/v1/status)')
      .action(async () => {
        const { conn, json } = io.globals();
        let v: StatusView;
        try {
          v = await call<StatusView>(conn, 'GET', '/status');
        } catch (e) {
          // A server older than GET /api/v1/status still answers everything else.
          if (refusedWith(e, 'no_route', 404))
            throw new CtlError(
              `${conn.servers.current} predates GET /api/v1/status: it is one instance on SQLite, its own leader (ctl version shows its version)`,
              'failed',
              404,
              'no_route',
            );
          throw e;
        }
        if (json) return io.printJson(v);
        const { statusText } = await import('./status-view.js');
        io.print(statusText(v, new Date()));
      }),
    'ctl status',
    'ctl status -o json | jq -r \'.leader.instance // "no leader"\'',
  );
}
