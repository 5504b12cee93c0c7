import fs from 'node:fs';
import type { Command } from 'commander';
import type { VersionView } from '@llmgw/shared';
import { call } from './client.js';
import { refusedWith } from './failure.js';
import type { Io } from './tokens-cmd.js';
import { examples } from './usage.js';

/**
 * ctl's own version, from its package.json: `../package.json` is the package's own from
 * src/ (tests) and from the bundled dist/cli.js alike.
 */
export const CTL_VERSION: string = (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** `ctl version [--client]`: like kubectl version, the client's line first, so it shows even when the server cannot answer. */
export function addVersionCommand(program: Command, io: Io): void {
  examples(
    program
      .command('version')
      .description("show ctl's version and the server's (GET /api/v1/version)")
      .option('--client', "ctl's version only; nothing is sent")
      .action(async (o: { client?: boolean }) => {
        const client: VersionView = { version: CTL_VERSION, node: process.version };
        const json = program.opts<{ output: string }>().output === 'json';
        if (!json) io.print(`Client Version: ${client.version} (Node.js ${client.node})`);
        if (o.client) return json ? io.printJson({ client }) : undefined;
        const { conn } = io.globals();
        let server: VersionView | undefined;
        try {
          server = await call<VersionView>(conn, 'GET', '/version');
        } catch (e) {
          // A server older than GET /api/v1/version still answers everything else.
          if (!refusedWith(e, 'no_route', 404)) throw e;
        }
        if (json) return io.printJson({ client, ...(server ? { server } : {}) });
        io.print(
          server
            ? `Server Version: ${server.version} (Node.js ${server.node}) at ${conn.servers.current}`
            : `Server Version: unknown (${conn.servers.current} predates GET /api/v1/version)`,
        );
      }),
    'ctl version',
    'ctl version --client -o json',
  );
}
