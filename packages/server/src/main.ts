import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, Option } from 'commander';
import { pino } from 'pino';
import { LOG_REDACT, flagOrEnv } from '@llmgw/shared';
import { CatalogError, CatalogWatcher, LoadedCatalog, describeDiff, diffCatalogs } from './catalog/catalog.js';
import { CONNECTION_DEFAULTS, startServer } from './server.js';
import { tokenFor } from './api/tokens.js';
import { DIR_MODE, octal, secureDataDir } from './store/modes.js';
import { collectSans, listenersTls } from './tls/index.js';
import { prepareJoinToken, readJoinToken } from './credentials/join-token.js';
import { MIGRATE_HELP, migrateSqliteToPostgres } from './store/migrate.js';
import { PostgresStore } from './store/postgres.js';
import { shareSecrets } from './cluster/secrets.js';
import { JOIN_APPROVALS, type JoinApproval } from './credentials/membership.js';

const home = process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw');
const opt = (flags: string, description: string, env: string, def?: string) => {
  const o = new Option(flags, description).env(env);
  return def === undefined ? o : o.default(def);
};

const program = new Command('llmgw-server')
  .description('The llmgw control plane: places models on the fleet, supervises them through agents, and serves them behind one OpenAI-compatible endpoint.')
  .version('0.1.0')
  .addOption(opt('--client-addr <host:port>', 'client listener (OpenAI-compatible API, API keys)', 'LLMGW_CLIENT_ADDR', '127.0.0.1:8080'))
  .addOption(opt('--admin-addr <host:port>', 'admin listener (admin API, dashboard, metrics, agent API)', 'LLMGW_ADMIN_ADDR', '127.0.0.1:8081'))
  .addOption(opt('--data-dir <dir>', 'where the SQLite store and generated tokens live', 'LLMGW_DATA_DIR', path.join(home, 'server')))
  .addOption(opt('--database-url <url>', 'postgres://USER@HOST:PORT/DB: share one PostgreSQL with other llmgw-server instances (one leads, all serve); default: SQLite in --data-dir', 'LLMGW_DATABASE_URL'))
  .addOption(opt('--instance-id <id>', "this instance's name among several on one database (ctl status)", 'LLMGW_INSTANCE_ID'))
  .addOption(opt('--leader-lease <seconds>', "how long the leader's lease lasts unrenewed: a dead or paused leader is replaced after at most this (with --database-url)", 'LLMGW_LEADER_LEASE', '2'))
  .addOption(opt('--catalog <file>', 'catalog YAML: which models to run (reloaded on SIGHUP and on change)', 'LLMGW_CATALOG'))
  .addOption(opt('--not-ready-after <seconds>', 'a node silent this long is not-ready (no traffic, no placement)', 'LLMGW_NOT_READY_AFTER', '15'))
  .addOption(opt('--lost-after <seconds>', 'a node silent this long is lost (its replicas are replaced)', 'LLMGW_LOST_AFTER', '300'))
  .addOption(opt('--reconcile-interval <seconds>', 'seconds between reconcile passes (changes also trigger one)', 'LLMGW_RECONCILE_INTERVAL', '5'))
  .addOption(opt('--failed-backoff <seconds>', 'first wait before a failed replica is replaced (doubles per failure)', 'LLMGW_FAILED_BACKOFF', '30'))
  .addOption(opt('--max-body-size <bytes>', 'largest client request body; larger ones get 413', 'LLMGW_MAX_BODY_SIZE', String(10 * 1024 * 1024)))
  .addOption(opt('--upstream-timeout <seconds>', "longest wait for an engine's response headers (a non-streamed reply has them only when done)", 'LLMGW_UPSTREAM_TIMEOUT', '600'))
  .addOption(opt('--cooldown <seconds>', 'how long a replica that failed a request gets no traffic', 'LLMGW_COOLDOWN', '5'))
  .addOption(opt('--stream-idle-timeout <seconds>', 'a stream whose engine sends nothing this long (after its headers) ends with an error event', 'LLMGW_STREAM_IDLE_TIMEOUT', '60'))
  .addOption(opt('--prefix-cache-tokens <n>', "prefix cache capacity, in tokens, that cache-aware routing assumes for a replica whose engine does not say (llmgw's engines send x-llmgw-prefix-cache-tokens)", 'LLMGW_PREFIX_CACHE_TOKENS', '500000'))
  .addOption(opt('--keep-alive <seconds>', 'interval of ": keep-alive" comments on a stream waiting for its first token', 'LLMGW_KEEP_ALIVE', '5'))
  .addOption(opt('--drain-parallel <n>', 'replicas of one model replaced at a time when a node drains', 'LLMGW_DRAIN_PARALLEL', '1'))
  .addOption(opt('--min-healthy <seconds>', 'a replacement must be ready this long before the replica it replaces stops taking traffic', 'LLMGW_MIN_HEALTHY', '3'))
  .addOption(opt('--drain-timeout <seconds>', "longest wait for a stepped-down replica's in-flight requests", 'LLMGW_DRAIN_TIMEOUT', '60'))
  .addOption(opt('--max-lost-fraction <0..1>', 'above this share of nodes silent at once, their replicas are not replaced', 'LLMGW_MAX_LOST_FRACTION', '0.5'))
  .addOption(opt('--cold-start-timeout <seconds>', 'how long a request for a model scaled to zero waits for a replica', 'LLMGW_COLD_START_TIMEOUT', '300'))
  .addOption(opt('--headers-timeout <seconds>', "longest wait for a request's headers; the connection is then closed (both listeners)", 'LLMGW_HEADERS_TIMEOUT', String(CONNECTION_DEFAULTS.headersTimeoutS)))
  .addOption(opt('--request-timeout <seconds>', 'longest wait for a whole request, headers and body, before a 408 and close (both listeners; long-polls and streams are responses, so not cut)', 'LLMGW_REQUEST_TIMEOUT', String(CONNECTION_DEFAULTS.requestTimeoutS)))
  .addOption(opt('--idle-timeout <seconds>', 'how long a kept-alive connection may sit idle between requests (both listeners)', 'LLMGW_IDLE_TIMEOUT', String(CONNECTION_DEFAULTS.keepAliveTimeoutS)))
  .addOption(opt('--max-connections <n>', 'connections open at once per listener; more are closed as they arrive', 'LLMGW_MAX_CONNECTIONS', String(CONNECTION_DEFAULTS.maxConnections)))
  .addOption(opt('--tls-cert <file>', "the admin listener's certificate (PEM, chain ending with its CA) instead of the generated one", 'LLMGW_TLS_CERT'))
  .addOption(opt('--tls-key <file>', 'the private key of --tls-cert (PEM)', 'LLMGW_TLS_KEY'))
  .addOption(new Option('--tls-san <name>', 'another name or address the generated certificate must carry (repeat, or comma-separate)').env('LLMGW_TLS_SAN').argParser(collectSans).default([]))
  .addOption(new Option('--insecure-http', 'serve the admin listener as plain HTTP (only behind a proxy that terminates TLS) (or LLMGW_INSECURE_HTTP=1; 0/false/no/off is off)'))
  .addOption(opt('--client-tls-cert <file>', "the client listener's certificate (PEM); with --client-tls-key it serves HTTPS", 'LLMGW_CLIENT_TLS_CERT'))
  .addOption(opt('--client-tls-key <file>', 'the private key of --client-tls-cert (PEM)', 'LLMGW_CLIENT_TLS_KEY'))
  .addOption(opt('--join-approval <mode>', 'auto: a node that joins takes work at once; manual: it waits as pending-approval until ctl nodes approve', 'LLMGW_JOIN_APPROVAL', 'auto').choices(JOIN_APPROVALS))
  .addOption(opt('--models-dir <dir>', 'serve the model files in this directory to agents (node credential, resumable) as llmgw://FILE sources', 'LLMGW_MODELS_DIR'))
  .addOption(opt('--log-level <level>', 'debug, info, warn or error', 'LLMGW_LOG_LEVEL', 'info'))
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
      '\nreconciles. They share the admin token, join token, engine-key secret and CA through the database (the first instance\'s win).' +
      '\nGive every instance the same catalog file; `llmgw-server migrate --from-sqlite FILE` moves a SQLite install there.' +
      '\n\nA catalog source may be an http(s):// URL or llmgw://FILE (a file in --models-dir) with its sha256: agents fetch, verify and cache it.',
  )
  .action(async (o: Record<string, string | undefined> & { tlsSan: string[]; insecureHttp?: boolean }) => {
    const log = pino({ level: o.logLevel ?? 'info', base: { svc: 'llmgw-server' }, redact: LOG_REDACT });
    // Not commander's .env(): it would turn the flag on for LLMGW_INSECURE_HTTP=0.
    try {
      o.insecureHttp = flagOrEnv(o.insecureHttp, 'LLMGW_INSECURE_HTTP', process.env);
    } catch (e) {
      fail((e as Error).message);
    }
    const num = (name: string, v: string | undefined) => {
      const n = Number(v);
      if (!(n > 0)) fail(`invalid --${name} "${v}": want a number of seconds > 0`);
      return n;
    };
    const nonNeg = (name: string, v: string | undefined) => {
      const n = Number(v);
      if (!(n >= 0)) fail(`invalid --${name} "${v}": want a number >= 0`);
      return n;
    };
    const count = (name: string, v: string | undefined) => {
      const n = Number(v);
      if (!(Number.isInteger(n) && n > 0)) fail(`invalid --${name} "${v}": want a whole number > 0`);
      return n;
    };
    const fraction = (name: string, v: string | undefined) => {
      const n = Number(v);
      if (!(n > 0 && n <= 1)) fail(`invalid --${name} "${v}": want a number in (0, 1]`);
      return n;
    };
    const dataDir = path.resolve(o.dataDir!);
    const modelsDir = o.modelsDir === undefined ? undefined : path.resolve(o.modelsDir);
    if (modelsDir !== undefined && !fs.statSync(modelsDir, { throwIfNoEntry: false })?.isDirectory()) fail(`--models-dir ${modelsDir} is not a directory: create it and put the model files there`);
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
      const f = { adminAddr: o.adminAddr!, dataDir, tlsSan: o.tlsSan, insecureHttp: Boolean(o.insecureHttp) };
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
          clientAddr: o.clientAddr!,
          adminAddr: o.adminAddr!,
          adminToken: admin.token,
          joinToken: join.secret,
          // A secret from LLMGW_JOIN_TOKEN is changed there; only a generated one rotates.
          ...(process.env.LLMGW_JOIN_TOKEN ? {} : { joinTokenFile: join.file }),
          joinApproval: o.joinApproval as JoinApproval,
          dataDir,
          notReadyAfterS: num('not-ready-after', o.notReadyAfter),
          lostAfterS: num('lost-after', o.lostAfter),
          reconcileIntervalS: num('reconcile-interval', o.reconcileInterval),
          failedBackoffS: num('failed-backoff', o.failedBackoff),
          maxBodyBytes: num('max-body-size', o.maxBodySize),
          upstreamTimeoutS: num('upstream-timeout', o.upstreamTimeout),
          cooldownS: num('cooldown', o.cooldown),
          keepAliveS: num('keep-alive', o.keepAlive),
          prefixCacheTokens: count('prefix-cache-tokens', o.prefixCacheTokens),
          drainParallel: num('drain-parallel', o.drainParallel),
          minHealthyS: nonNeg('min-healthy', o.minHealthy),
          drainTimeoutS: num('drain-timeout', o.drainTimeout),
          maxLostFraction: fraction('max-lost-fraction', o.maxLostFraction),
          coldStartTimeoutS: num('cold-start-timeout', o.coldStartTimeout),
          connections: {
            headersTimeoutS: num('headers-timeout', o.headersTimeout),
            requestTimeoutS: num('request-timeout', o.requestTimeout),
            keepAliveTimeoutS: num('idle-timeout', o.idleTimeout),
            maxConnections: count('max-connections', o.maxConnections),
          },
          streamIdleTimeoutS: num('stream-idle-timeout', o.streamIdleTimeout),
          ...(tls.admin ? { adminTls: tls.admin } : {}),
          ...(tls.client ? { clientTls: tls.client } : {}),
          ...(modelsDir !== undefined ? { modelsDir } : {}),
          ...(o.databaseUrl ? { databaseUrl: o.databaseUrl, leaderLeaseS: num('leader-lease', o.leaderLease) } : {}),
          ...(o.instanceId ? { instanceId: o.instanceId } : {}),
        },
        catalog,
        log,
        { catalogStatus: watcher },
      );
    } catch (err) {
      fail(`cannot start: ${(err as Error).message}`);
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
  .addOption(opt('--database-url <url>', 'the empty llmgw database: postgres://user:password@host:port/database', 'LLMGW_DATABASE_URL'))
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

function fail(message: string | string[]): never {
  for (const line of [message].flat()) process.stderr.write(`llmgw-server: ${line}\n`);
  process.exit(2);
}

await program.parseAsync();
