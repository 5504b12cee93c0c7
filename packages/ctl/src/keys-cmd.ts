import type { Command } from 'commander';
import { PRIORITIES, type KeyCreated, type KeyRevokeReply, type KeyUpdateRequest, type KeyView, type Priority, type UsageRow } from '@llmgw/shared';
import { call } from './client.js';
import { CtlError } from './failure.js';
import type { Io } from './tokens-cmd.js';
import { examplesText } from './usage.js';

/** The tables, with cli-table3 and chalk: loaded when a command prints one (issue 32). */
const tables = () => import('./tables.js');

/** A flag's whole number >= 1, or a usage error naming the flag. */
function int(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new CtlError(`invalid ${flag} "${v}": want a whole number >= 1`, 'usage');
  return n;
}

/** For `keys update`: a whole number, or `none` to remove the limit. */
function limit(flag: string, v: string): number | null {
  return v === 'none' ? null : int(flag, v);
}

function priority(v: string): Priority {
  if (!(PRIORITIES as readonly string[]).includes(v)) throw new CtlError(`invalid --priority "${v}": want one of ${PRIORITIES.join(', ')}`, 'usage');
  return v as Priority;
}

const list = (v: string) =>
  v
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);

/**
 * `ctl keys create|list|update|revoke` and `ctl usage [--since]`: client API keys with
 * their limits (rpm, tpm, concurrency) and priority band, and what each key used.
 */
export function addKeyCommands(program: Command, io: Io): void {
  const keys = program.command('keys').description('client API keys for the OpenAI-compatible endpoint');

  keys
    .command('create')
    .description('create a key; its secret is shown once')
    .requiredOption('--name <name>', 'who or what the key is for')
    .option('--models <a,b>', 'models (names or aliases) the key may use; default all')
    .option('--rpm <n>', 'requests per minute')
    .option('--tpm <n>', "prompt + completion tokens per minute, from the engines' reported usage")
    .option('--max-concurrent <n>', 'requests in flight at once')
    .option('--priority <band>', `who goes first while every replica is saturated: ${PRIORITIES.join(', ')} (default standard)`)
    .option('--expires <when>', 'a duration (30d, 12h, 90m) or an ISO 8601 time')
    .addHelpText(
      'after',
      examplesText(
        'ctl keys create --name webapp --rpm 600 --tpm 200000 --expires 30d',
        'ctl keys create --name nightly --priority batch',
        'ctl keys create --name ci --models coder,echo -o json   # the secret is in "secret"',
      ),
    )
    .action(async (o: { name: string; models?: string; rpm?: string; tpm?: string; maxConcurrent?: string; priority?: string; expires?: string }) => {
      const { conn, json } = io.globals();
      const body = {
        name: o.name,
        ...(o.models ? { models: list(o.models) } : {}),
        ...(o.rpm !== undefined ? { rpm: int('--rpm', o.rpm) } : {}),
        ...(o.tpm !== undefined ? { tpm: int('--tpm', o.tpm) } : {}),
        ...(o.maxConcurrent !== undefined ? { max_concurrent: int('--max-concurrent', o.maxConcurrent) } : {}),
        ...(o.priority !== undefined ? { priority: priority(o.priority) } : {}),
        ...(o.expires ? { expires_at: (await tables()).parseExpiry(o.expires, new Date()) } : {}),
      };
      const created = await call<KeyCreated>(conn, 'POST', '/keys', body);
      if (json) return io.printJson(created);
      io.print(`key/${created.key.id} created for ${created.key.name}`);
      io.print(`secret: ${created.secret}`);
      io.print('Store it now: it is not shown again.');
    });

  keys
    .command('list')
    .description('list keys (never their secrets)')
    .addHelpText('after', examplesText('ctl keys list'))
    .action(async () => {
      const { conn, json } = io.globals();
      const all = await call<KeyView[]>(conn, 'GET', '/keys');
      if (json) return io.printJson(all);
      io.print((await tables()).keysTable(all, new Date()));
    });

  keys
    .command('update <id>')
    .description('change a key\u2019s limits, band or models (by id, or by name); the flags given change, the rest stay; it applies at once')
    .option('--rpm <n|none>', 'requests per minute; none removes the limit')
    .option('--tpm <n|none>', 'prompt + completion tokens per minute; none removes the quota')
    .option('--max-concurrent <n|none>', 'requests in flight at once; none removes the limit')
    .option('--priority <band>', `${PRIORITIES.join(', ')}`)
    .option('--models <a,b|all>', 'models (names or aliases) the key may use; all for every model')
    .addHelpText('after', examplesText('ctl keys update webapp --tpm 60000', 'ctl keys update key-a033492a --priority batch --rpm none'))
    .action(async (id: string, o: { rpm?: string; tpm?: string; maxConcurrent?: string; priority?: string; models?: string }) => {
      const { conn, json } = io.globals();
      const body: KeyUpdateRequest = {
        ...(o.rpm !== undefined ? { rpm: limit('--rpm', o.rpm) } : {}),
        ...(o.tpm !== undefined ? { tpm: limit('--tpm', o.tpm) } : {}),
        ...(o.maxConcurrent !== undefined ? { max_concurrent: limit('--max-concurrent', o.maxConcurrent) } : {}),
        ...(o.priority !== undefined ? { priority: priority(o.priority) } : {}),
        ...(o.models !== undefined ? { models: o.models === 'all' ? [] : list(o.models) } : {}),
      };
      if (Object.keys(body).length === 0)
        throw new CtlError('nothing to change: give at least one of --rpm, --tpm, --max-concurrent, --priority, --models', 'usage');
      const k = await call<KeyView>(conn, 'PATCH', `/keys/${encodeURIComponent(id)}`, body);
      if (json) return io.printJson(k);
      io.print(`key/${k.id} updated`);
      io.print((await tables()).keysTable([k], new Date()));
    });

  keys
    .command('revoke <id>')
    .description('revoke a key by id (or by name); it stops working at once')
    .addHelpText('after', examplesText('ctl keys revoke key-a033492a', 'ctl keys revoke webapp'))
    .action(async (id: string) => {
      const { conn, json } = io.globals();
      const k = await call<KeyRevokeReply>(conn, 'DELETE', `/keys/${encodeURIComponent(id)}`);
      if (json) return io.printJson(k);
      io.print(k.already ? `key/${k.id} already revoked${k.revoked_at ? ` (at ${k.revoked_at})` : ''}` : `key/${k.id} revoked`);
    });

  program
    .command('usage')
    .description('requests and tokens per key and model: since each key was created, or over a window (--since)')
    .option('--since <when>', 'a duration back from now (30m, 1h, 7d) or an ISO 8601 time; counted in whole minutes, kept 31 days')
    .addHelpText('after', examplesText('ctl usage', 'ctl usage --since 1h', 'ctl usage --since 2026-12-01T00:00:00Z -o json'))
    .action(async (o: { since?: string }) => {
      const { conn, json } = io.globals();
      // The server reads the duration on its own clock, so every instance answers the same window.
      const rows = await call<UsageRow[]>(conn, 'GET', `/usage${o.since !== undefined ? `?since=${encodeURIComponent(o.since)}` : ''}`);
      if (json) return io.printJson(rows);
      io.print((await tables()).usageTable(rows, o.since));
    });
}
