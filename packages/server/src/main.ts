import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { pino } from 'pino';
import { LOG_REDACT } from '@llmgw/shared';
import { CatalogError, CatalogWatcher, LoadedCatalog, describeDiff, diffCatalogs } from './catalog/catalog.js';
import { startServer } from './server.js';
import { addServerOptions, readServerSettings, settingOptionOf, tuningOf, type ServerConfig } from './settings.js';
import { DIR_MODE, octal, secureDataDir, tokenFor } from './store/modes.js';
import { listenersTls, parseAddr } from './tls/index.js';
import { prepareJoinToken, readJoinToken } from './credentials/join-token.js';
import { MIGRATE_HELP, migrateSqliteToPostgres } from './cluster/migrate.js';
import { PostgresStore } from './store/postgres.js';
import { shareSecrets } from './cluster/secrets.js';

const program = addServerOptions(
  new Command('llmgw-server')
    .description('The llmgw control plane: places models on the fleet, supervises them through agents, and serves them behind one OpenAI-compatible endpoint.')
    .version('0.1.0'),
)
  .addHelpText(
    'after',
    '\nSecrets come from the environment, never flags: LLMGW_ADMIN_TOKEN (ctl, dashboard) and LLMGW_JOIN_TOKEN (agents).\nWhen unset, each is generated once and kept in the data directory (files admin-token and join-token).' +
      '\nThe admin token is the bootstrap admin; ctl tokens create makes admin, viewer (read-only) and metrics (/metrics only) tokens.' +
      '\nThe data directory is kept 0700, llmgw.db and the secret files 0600; engine keys are derived from <data-dir>/engine-key-secret, never stored.' +
      '\n\nThe admin listener serves HTTPS with a CA made on first start (<data-dir>/tls/ca.pem; ctl --ca, curl --cacert).' +
      '\nThe certificate names the listen address, the hostname, every address of this machine and --tls-san; it is reissued from the same CA when that changes.' +
      '\n<data-dir>/join-token holds the full join token (the secret pinned to the CA); `llmgw-server join-token` prints it.' +
      '\nThe join token only joins: each agent trades it once for its own node credential. ctl join-token rotate replaces a generated one\n(the file is rewritten); one set by LLMGW_JOIN_TOKEN is changed there, with a restart.' +
      '\n\nThe store is <data-dir>/llmgw.db. A file there that is empty, not SQLite, not an llmgw store or corrupt is refused at start (exit 2).' +
      '\nWhile the store refuses writes (a full disk), writes answer 503 "store unavailable", /healthz says "degraded", and the server recovers by itself.' +
      '\n\nWith --database-url several instances share one PostgreSQL: each serves clients, operators and agents; one, elected through the database,' +
      "\nreconciles. They share the admin token, join token, engine-key secret and CA through the database (the first instance's win)." +
      '\nGive every instance the same catalog file; `llmgw-server migrate --from-sqlite FILE` moves a SQLite install there.' +
      '\n\nA command line it refuses (an unknown flag, a bad value or address, TLS flags that contradict) exits 2 before anything is written.' +
      '\n\nA catalog source may be an http(s):// URL or llmgw://FILE (a file in --models-dir) with its sha256: agents fetch, verify and cache it.',
  )
  .action(async () => {
    let o: ServerConfig;
    try {
      o = readServerSettings(program);
    } catch (e) {
      fail((e as Error).message);
    }
    const log = pino({ level: o.logLevel, base: { svc: 'llmgw-server' }, redact: LOG_REDACT });
    const dataDir = path.resolve(o.dataDir);
    const modelsDir = o.modelsDir === undefined ? undefined : path.resolve(o.modelsDir);
    if (modelsDir !== undefined && !fs.statSync(modelsDir, { throwIfNoEntry: false })?.isDirectory())
      fail(`--models-dir ${modelsDir} is not a directory: create it and put the model files there`);
    let watcher: CatalogWatcher | undefined;
    let catalog = new LoadedCatalog('(none)', []);
    if (o.catalog) {
      try {
        watcher = await CatalogWatcher.start(path.resolve(o.catalog), {
          rules: { modelsDir: modelsDir !== undefined },
          onChange: (next, previous) => {
            // What changed, so the last line after fixing a typo is not still the error.
            const diff = diffCatalogs(previous, next);
            log.info({ file: next.file, models: next.models.map((m) => m.name), ...diff }, `catalog reloaded: ${describeDiff(diff)}`);
            running?.controller.setCatalog(next);
          },
          onRecover: (current) => log.info({ file: current.file }, 'catalog reloaded: the file is fixed and matches the running catalog; no model changed'),
          onError: (err) => log.error({ file: err.file, problems: err.lines() }, `catalog reload failed, keeping the running catalog: ${err.message}`),
        });
        catalog = watcher.current;
      } catch (err) {
        // Every problem, one line each: the launcher relays these lines to the terminal.
        fail(err instanceof CatalogError ? err.lines() : `cannot read catalog ${o.catalog}: ${(err as Error).message}`);
      }
    } else {
      log.warn('no --catalog given: no models will be placed');
    }
    try {
      const had = secureDataDir(dataDir);
      if (had !== undefined) log.warn({ dataDir, was: octal(had), now: octal(DIR_MODE) }, 'data directory was readable by others; tightened it to 0700');
    } catch (err) {
      fail(`cannot make the data directory ${dataDir} (${(err as Error).message}): check --data-dir, or create it as the user that runs llmgw-server`);
    }
    if (o.databaseUrl) {
      // Every instance on the database takes one admin token, join secret, engine-key secret and CA into its files, before they are read below.
      try {
        const db = await PostgresStore.open(o.databaseUrl, { poolSize: 1 });
        await shareSecrets(db, dataDir, log, { ca: !o.insecureHttp && !o.tlsCert }).finally(() => db.close());
      } catch (err) {
        fail(`cannot start: ${(err as Error).message}`);
      }
    }
    const admin = tokenFor(process.env.LLMGW_ADMIN_TOKEN, dataDir, 'admin-token');
    if (admin.file) log.info({ file: admin.file }, 'admin token (for ctl and the dashboard) is in this file');
    let tls: Awaited<ReturnType<typeof listenersTls>> = {};
    try {
      const f = { adminAddr: o.adminAddr, dataDir, tlsSan: o.tlsSan, insecureHttp: o.insecureHttp };
      tls = await listenersTls({ ...f, tlsCert: o.tlsCert, tlsKey: o.tlsKey, clientTlsCert: o.clientTlsCert, clientTlsKey: o.clientTlsKey }, log);
    } catch (err) {
      fail((err as Error).message);
    }
    const join = prepareJoinToken(process.env.LLMGW_JOIN_TOKEN, dataDir, tls.admin?.caPem);
    log.info({ file: join.file }, 'join token for agents (LLMGW_JOIN_TOKEN, or `llmgw-server join-token`) is in this file');
    let running: Awaited<ReturnType<typeof startServer>> | undefined;
    try {
      running = await startServer(
        {
          clientAddr: o.clientAddr,
          adminAddr: o.adminAddr,
          ...tuningOf(o),
          adminToken: admin.token,
          joinToken: join.secret,
          // A secret from LLMGW_JOIN_TOKEN is changed there; only a generated one rotates.
          ...(process.env.LLMGW_JOIN_TOKEN ? {} : { joinTokenFile: join.file }),
          joinApproval: o.joinApproval,
          allowLoopbackNodes: o.allowLoopbackNodes,
          bindCredentials: o.bindCredentials,
          dataDir,
          ...(tls.admin ? { adminTls: tls.admin } : {}),
          ...(tls.client ? { clientTls: tls.client } : {}),
          ...(modelsDir !== undefined ? { modelsDir } : {}),
          ...(o.databaseUrl ? { databaseUrl: o.databaseUrl } : {}),
          ...(o.instanceId ? { instanceId: o.instanceId } : {}),
        },
        catalog,
        log,
        { catalogStatus: watcher },
      );
    } catch (err) {
      fail(`cannot start: ${(err as Error).message}${inUseHint(err, o)}`);
    }
    // A reload between the first load and the listeners reached no controller yet.
    if (watcher && watcher.current !== catalog) running.controller.setCatalog(watcher.current);
    process.on('SIGHUP', () => {
      if (!watcher) return log.warn('SIGHUP: no --catalog to reload');
      void watcher.reload();
    });
    const shutdown = async (signal: string) => {
      log.info({ signal }, 'llmgw-server stopping');
      // What is still unwritten after 15 s (a database that stopped answering) is given up.
      setTimeout(() => {
        log.error('llmgw-server did not stop within 15 s (the store does not answer); exiting');
        process.exit(1);
      }, 15_000).unref();
      watcher?.close();
      await running?.close();
      process.exit(0);
    };
    process.on('SIGTERM', () => void shutdown('SIGTERM'));
    process.on('SIGINT', () => void shutdown('SIGINT'));
  });

program
  .command('join-token')
  .description('print the full join token (the secret pinned to the CA) that agents need; reads --data-dir')
  .action(() => {
    // --data-dir (or LLMGW_DATA_DIR) is the server's own option, read before or after the subcommand.
    const { dataDir } = program.opts<{ dataDir: string }>();
    try {
      process.stdout.write(`${readJoinToken(path.resolve(dataDir))}\n`);
    } catch (err) {
      fail((err as Error).message);
    }
  });

program
  .command('migrate')
  .description('copy a SQLite store and its secrets into an empty PostgreSQL database (the upgrade to several servers)')
  .requiredOption('--from-sqlite <file>', 'the llmgw.db of the SQLite install (or its data directory); read only')
  .addOption(settingOptionOf(program, 'databaseUrl', 'the empty llmgw database: postgres://user:password@host:port/database'))
  .addHelpText('after', MIGRATE_HELP)
  .action(async (o: { fromSqlite: string; databaseUrl?: string }) => {
    // The server's own --database-url, when the lead's main options define it, may take the flag first.
    const url = o.databaseUrl ?? program.opts<{ databaseUrl?: string }>().databaseUrl;
    if (!url) fail('give --database-url postgres://… (or LLMGW_DATABASE_URL): the empty database to migrate into');
    try {
      const done = await migrateSqliteToPostgres(o.fromSqlite, url);
      for (const note of done.notes) process.stderr.write(`llmgw-server: note: ${note}\n`);
      process.stdout.write(`${done.summary}\n`);
    } catch (err) {
      fail((err as Error).message);
    }
  });

/** For a port in use: which flag (or variable) moves that listener. */
function inUseHint(err: unknown, o: ServerConfig): string {
  const e = err as NodeJS.ErrnoException & { port?: number };
  if (e.code !== 'EADDRINUSE') return '';
  const which = parseAddr(o.adminAddr).port === e.port ? '--admin-addr (LLMGW_ADMIN_ADDR)' : '--client-addr (LLMGW_CLIENT_ADDR)';
  return ` (another process listens there, perhaps another llmgw-server: stop it, or give ${which} another port)`;
}

function fail(message: string | string[]): never {
  for (const line of [message].flat()) process.stderr.write(`llmgw-server: ${line}\n`);
  process.exit(2);
}

// Every usage error exits 2, as `fail` and ctl do (commander's own, an unknown option or a
// missing value, would exit 1); help and --version stay 0.
for (const cmd of [program, ...program.commands]) cmd.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
await program.parseAsync();
