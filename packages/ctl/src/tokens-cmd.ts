import { Option, type Command } from 'commander';
import { TOKEN_ROLES, type TokenCreated, type TokenView } from '@llmgw/shared';
import { call, type Connection } from './client.js';
import { examplesText } from './usage.js';

/** What a command needs from the program: the connection and output format, and the printers. */
export interface Io {
  globals(): { conn: Connection; json: boolean };
  print(text: string): void;
  printJson(v: unknown): void;
}

/**
 * `ctl tokens create|list|revoke`: tokens of the admin listener with a role (admin,
 * viewer, metrics), so that a dashboard reader or Prometheus never holds the admin token.
 */
export function addTokenCommands(program: Command, io: Io): void {
  const tokens = program.command('tokens').description('tokens for the admin listener with a role: admin, viewer (read-only), metrics (/metrics only)');

  tokens
    .command('create')
    .description('create a token; its secret is shown once')
    .requiredOption('--name <name>', 'who or what the token is for')
    .addOption(
      new Option('--role <role>', 'admin: everything; viewer: every read and the dashboard read-only; metrics: GET /metrics only')
        .choices(TOKEN_ROLES)
        .makeOptionMandatory(),
    )
    .addHelpText('after', examplesText('ctl tokens create --name grafana --role viewer', 'ctl tokens create --name prom --role metrics -o json'))
    .action(async (o: { name: string; role: string }) => {
      const { conn, json } = io.globals();
      const created = await call<TokenCreated>(conn, 'POST', '/tokens', { name: o.name, role: o.role });
      if (json) return io.printJson(created);
      io.print(`token/${created.token.id} created for ${created.token.name} (role ${created.token.role})`);
      io.print(`secret: ${created.secret}`);
      io.print('Store it now: it is not shown again.');
    });

  tokens
    .command('list')
    .description('list tokens (never their secrets); the bootstrap admin token is not among them')
    .addHelpText('after', examplesText('ctl tokens list'))
    .action(async () => {
      const { conn, json } = io.globals();
      const list = await call<TokenView[]>(conn, 'GET', '/tokens');
      if (json) return io.printJson(list);
      const { tokensTable } = await import('./tables.js');
      io.print(tokensTable(list));
    });

  tokens
    .command('revoke <id>')
    .description('revoke a token by id (or by name); it stops working at once, its dashboard sessions too')
    .addHelpText('after', examplesText('ctl tokens revoke tok-1a2b3c4d'))
    .action(async (id: string) => {
      const { conn, json } = io.globals();
      const t = await call<TokenView>(conn, 'DELETE', `/tokens/${encodeURIComponent(id)}`);
      if (json) return io.printJson(t);
      io.print(`token/${t.id} revoked`);
    });
}
