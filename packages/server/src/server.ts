import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Logger } from 'pino';
import { adminApi } from './api/admin.js';
import { catalogApi } from './api/catalog-api.js';
import { rolloutsApi } from './api/rollouts-api.js';
import type { CatalogStatusSource } from './catalog/watch.js';
import { agentApi } from './api/agent.js';
import { Controller, type CatalogView } from './controller/controller.js';
import { SharedController } from './controller/shared.js';
import { newInstanceId } from './cluster/instances.js';
import { LeaderLease } from './cluster/lease.js';
import { SharedLimits } from './cluster/limits.js';
import { startCluster, type RunningCluster } from './cluster/start.js';
import { PostgresStore } from './store/postgres.js';
import { SERVER_VERSION } from './version.js';
import { soloStatus, statusApi } from './api/status-api.js';
import { readClusterStatus } from './cluster/status.js';
import { catalogInfo } from './catalog/info.js';
import { renderJoinToken, type StatusView } from '@llmgw/shared';
import { engineKeys } from './controller/engine-keys.js';
import { tokenFor } from './store/modes.js';
import { membershipApi } from './api/membership-api.js';
import { JoinToken } from './credentials/join-token.js';
import { JoinRate } from './credentials/join-rate.js';
import { Membership, type JoinApproval } from './credentials/membership.js';
import { CredentialSightings } from './credentials/sightings.js';
import { NodeCredentials } from './credentials/node-credentials.js';
import { dashboard } from './dashboard/dashboard.js';
import { fleetEvents } from './events/index.js';
import { HeaderEstimates } from './files/header-estimates.js';
import { nodeFilesApi } from './api/node-files.js';
import { Gateway } from './gateway/gateway.js';
import { Traffic } from './gateway/traffic.js';
import { ENDPOINTS } from './gateway/request.js';
import { AccessTokens, mayUseAdminApi, requireRole } from './api/access.js';
import { adminErrors, methodNotAllowed } from './http/http.js';
import { LINGER_MAX_BYTES, LINGER_MAX_MS, lingerOnEarlyAnswer } from './http/linger.js';
import { bodyRoutes, type BodyRoute } from './http/body-routes.js';
import { tokensApi } from './api/tokens-api.js';
import { requireAudited } from './api/routes.js';
import { DomainError } from './errors.js';
import { Inventory } from './inventory.js';
import { KeyRing } from './gateway/keys.js';
import { Metrics } from './metrics.js';
import { GuardedStore } from './store/guard.js';
import { SqliteStore } from './store/sqlite.js';
import type { Store } from './store/store.js';
import type { ServerTuning } from './settings.js';
import { parseAddr, type ListenerTls } from './tls/index.js';

/**
 * What `startServer` runs with: the measured settings of `settings.ts` (its table
 * declares each, with its unit, default and bounds; times are in ms), and what main
 * makes of the rest.
 */
export interface ServerSettings extends ServerTuning {
  clientAddr: string;
  adminAddr: string;
  adminToken: string;
  joinToken: string;
  /** Where a generated join token is kept (rotation rewrites it); absent when LLMGW_JOIN_TOKEN sets it. */
  joinTokenFile?: string;
  /** `manual`: new nodes wait as pending-approval until `ctl nodes approve`. Default `auto`. */
  joinApproval?: JoinApproval;
  dataDir: string;
  /**
   * `--allow-loopback-nodes`: a node may report a loopback `mgmt_addr` (a single-machine
   * fleet). Off, such a heartbeat is refused: the gateway would send prompts to this
   * machine's own services. Link-local, unspecified and numeric forms are refused always.
   */
  allowLoopbackNodes?: boolean;
  /**
   * `--bind-credentials`: a node credential heard from a second address or hostname while
   * the first is live is refused (403) rather than only marked suspect.
   */
  bindCredentials?: boolean;
  /** What engine keys are derived from; default: `<dataDir>/engine-key-secret`, made on first start. */
  engineKeySecret?: string;
  /**
   * TLS of the admin listener and the CA served on `/cacerts` (see `tls/`); absent
   * means plain HTTP, which `--insecure-http` asks for and the dashboard warns about.
   */
  adminTls?: ListenerTls & { caPem: string };
  /** TLS of the client listener (`--client-tls-cert`/`--client-tls-key`); absent = plain HTTP. */
  clientTls?: ListenerTls;
  /** Where `llmgw://NAME` sources are served from to agents (`--models-dir`); absent = none. */
  modelsDir?: string;
  /**
   * `postgres://…` (`--database-url`): the store is shared with other instances, one of
   * which leads (see cluster/). Absent: SQLite in `dataDir`, this instance alone.
   */
  databaseUrl?: string;
  /** This instance's name among several (`--instance-id`); default hostname-pid-random. */
  instanceId?: string;
}

/**
 * What one client connection may hold, the same on both listeners. The timeouts cover
 * receiving a request, never answering it: a long-poll or a stream is a long response to
 * a request received at once, so none of them cuts it.
 */
export type ConnectionLimits = Pick<ServerTuning, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'>;

export interface RunningServer {
  adminUrl: string;
  clientUrl: string;
  controller: Controller;
  keys: KeyRing;
  /** This instance's id (the one `ctl status` lists). */
  instanceId: string;
  /** Present with --database-url: the lease, the registry and the sync with the others. */
  cluster?: RunningCluster;
  /** Every route of both listeners that reads a body, with its limit: read from the routers, for the 413 matrix (test/body-limits.test.ts). */
  bodyRoutes(): BodyRoute[];
  close(): Promise<void>;
}

function listen(app: http.RequestListener, addr: string, limits: ConnectionLimits, tls?: ListenerTls): Promise<http.Server> {
  const { host, port } = parseAddr(addr);
  const headersTimeout = limits.headersTimeoutMs;
  const requestTimeout = limits.requestTimeoutMs;
  // An https.Server is an http.Server underneath (same timeouts, same request events). A
  // connection that never finishes its TLS handshake is as silent as one that never sends
  // its headers, and the headers timeout starts only after the handshake, so the handshake
  // gets the same time (Node's default is 120 s).
  const handshakeTimeout = Math.min(headersTimeout, requestTimeout);
  const create = (
    tls
      ? (o: http.ServerOptions, l: http.RequestListener) => https.createServer({ ...o, cert: tls.cert, key: tls.key, handshakeTimeout }, l)
      : http.createServer
  ) as typeof http.createServer;
  const linger = { maxBytes: LINGER_MAX_BYTES, maxMs: Math.min(LINGER_MAX_MS, requestTimeout) };
  const server = create(
    {
      // Node refuses a header timeout above the request timeout.
      headersTimeout: Math.min(headersTimeout, requestTimeout),
      requestTimeout,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // Both timeouts are checked on this interval (Node's default is 30 s), so a
      // connection is closed within its timeout plus at most a second.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.min(headersTimeout, requestTimeout) / 4)),
    },
    (req, res) => {
      lingerOnEarlyAnswer(req, res, linger);
      app(req, res);
    },
  );
  server.maxConnections = limits.maxConnections;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

function urlOf(server: http.Server): string {
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address === '0.0.0.0' ? '127.0.0.1' : a.address;
  return `${server instanceof https.Server ? 'https' : 'http'}://${host}:${a.port}`;
}

/**
 * Starts both listeners over one controller. Used by main and by in-process tests;
 * `deps.store` replaces the SQLite store in `dataDir` (tests inject failing ones);
 * `deps.catalogStatus` is the catalog file's watcher, whose failed reloads the admin API
 * and the dashboard show.
 */
export async function startServer(
  settings: ServerSettings,
  catalog: CatalogView,
  log: Logger,
  deps: { store?: Store; catalogStatus?: CatalogStatusSource } = {},
): Promise<RunningServer> {
  const pgStore = settings.databaseUrl !== undefined && !deps.store ? await PostgresStore.open(settings.databaseUrl, { log }) : undefined;
  const store = new GuardedStore(deps.store ?? pgStore ?? new SqliteStore(settings.dataDir), { log });
  const instanceId = settings.instanceId ?? newInstanceId();
  const lease = pgStore ? new LeaderLease({ pool: pgStore.pool, log, instanceId, ttlMs: settings.leaderLeaseMs }) : undefined;
  const inventory = await Inventory.load(
    store,
    { notReadyAfterMs: settings.notReadyAfterMs, lostAfterMs: settings.lostAfterMs },
    Date.now(),
    lease ? { shared: true } : {},
  );
  const traffic = new Traffic();
  // A reading that ends asks for a pass, so placement uses it at once. Readings start from
  // a pass, so the controller (made just below) is there by the time one ends.
  const headers = new HeaderEstimates({
    ...(settings.modelsDir !== undefined ? { modelsDir: settings.modelsDir } : {}),
    log,
    onChange: () => controller.notify(),
  });
  const controllerOpts = {
    reconcileIntervalMs: settings.reconcileIntervalMs,
    failedBackoffMs: settings.failedBackoffMs,
    drainParallel: settings.drainParallel,
    minHealthyMs: settings.minHealthyMs,
    drainTimeoutMs: settings.drainTimeoutMs,
    maxLostFraction: settings.maxLostFraction,
    engineProbeIntervalMs: settings.engineProbeIntervalMs,
    engineKey: engineKeys(settings.engineKeySecret ?? tokenFor(undefined, settings.dataDir, 'engine-key-secret').token),
    // The gateway counts its traffic here; the controller copies it each pass, the metrics read it at scrape time.
    load: traffic,
    estimates: headers,
  };
  const controller = lease
    ? await SharedController.loadShared(inventory, store, catalog, controllerOpts, log, lease)
    : await Controller.load(inventory, store, catalog, controllerOpts, log);
  const events = await fleetEvents(store, controller, log);

  // On PostgreSQL the ring adds the other instances' counts to its own; they read this
  // instance's from the ring, from their first sync on (`startCluster`).
  const limits = pgStore ? new SharedLimits({ pool: pgStore.pool, log, instanceId, source: () => keys.localCounts() }) : undefined;
  const keys = await KeyRing.load(store, Date.now, limits);
  keys.onUsageRefused = (rows) => log.error({ rows }, `the store refused ${rows.length} usage row(s) for their values; skipped, the other rows were written`);
  // `gateway` is made next; a scrape (after the listeners start) is the first to read it.
  const metrics: Metrics = new Metrics({
    inFlight: () => traffic.inFlightByReplica(),
    store: () => store.stats(),
    queued: () => gateway.queued(),
    saturation: () => gateway.saturation(),
  });
  const gateway = new Gateway(
    controller,
    keys,
    metrics,
    traffic,
    {
      maxBodyBytes: settings.maxBodyBytes,
      replyBufferBytes: settings.replyBufferBytes,
      upstreamTimeoutMs: settings.upstreamTimeoutMs,
      cooldownMs: settings.cooldownMs,
      keepAliveMs: settings.keepAliveMs,
      coldStartTimeoutMs: settings.coldStartTimeoutMs,
      health: () => store.health(),
      streamIdleTimeoutMs: settings.streamIdleTimeoutMs,
      prefixCacheTokens: settings.prefixCacheTokens,
      flow: { saturation: { maxWaitMs: settings.saturationWaitMs }, queue: { ttlMs: settings.queueTtlMs, maxPerBand: settings.queueMax } },
    },
    log,
  );

  const admin = express();
  admin.disable('x-powered-by');
  admin.get('/healthz', (_req, res) => {
    res.json(store.health());
  });
  const caPem = settings.adminTls?.caPem;
  // Unauthenticated on purpose: an agent fetches it before it trusts anything, and
  // checks it against the pin in its join token (k3s's `/cacerts`).
  if (caPem) admin.get('/cacerts', (_req, res) => void res.type('application/x-pem-file').send(caPem));
  const credentials = await NodeCredentials.load(store);
  // A generated join secret is shared through the database on PostgreSQL; one from LLMGW_JOIN_TOKEN is each instance's own.
  const joinToken = new JoinToken(
    settings.joinToken,
    settings.joinTokenFile,
    (secret) => renderJoinToken(secret, caPem),
    settings.joinTokenFile !== undefined ? pgStore : undefined,
  );
  const sightings = new CredentialSightings({ liveMs: settings.notReadyAfterMs, bind: settings.bindCredentials === true });
  const membership = new Membership(controller, credentials, joinToken, settings.joinApproval ?? 'auto', log, new JoinRate(settings.joinRate), sightings);
  const agent = agentApi(controller, membership, {
    caps: { maxRequests: settings.nodeMaxRequests, maxLongPolls: settings.nodeMaxLongPolls },
    ...(settings.modelsDir !== undefined ? { modelsDir: settings.modelsDir } : {}),
    allowLoopbackNodes: settings.allowLoopbackNodes === true,
    sightings,
    suspectForMs: settings.lostAfterMs,
    onCredential: events.onCredential,
  });
  admin.use('/agent/v1', agent.router);
  // Tokens with roles (api/access.ts): the admin API takes admin and, for reads, viewer
  // tokens; /metrics any of them, so Prometheus can hold a token that does nothing else.
  const access = await AccessTokens.load(store, settings.adminToken);
  // Filled in once the listeners (and, on PostgreSQL, the registry) are up.
  let status: () => Promise<StatusView> = () => Promise.reject(new DomainError('store_unavailable', 'starting'));
  const api = [
    events.api,
    tokensApi(access),
    adminApi(controller, keys, gateway.adapters),
    membershipApi(membership),
    catalogApi(controller, deps.catalogStatus),
    rolloutsApi(controller),
    statusApi({ status: () => status() }),
    nodeFilesApi(controller),
  ];
  // A write that succeeds unrecorded is a bug in how it was registered: the server does not start with one.
  requireAudited(api);
  admin.use(
    '/api/v1',
    requireRole(access, 'admin token', (role, req) => mayUseAdminApi(role, req.method)),
    events.adminAudit,
    ...api,
  );
  admin
    .route('/metrics')
    .get(
      requireRole(access, 'metrics token', () => true),
      async (_req, res) => {
        res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
      },
    )
    .all(methodNotAllowed);
  admin.use(
    '/',
    dashboard(controller, keys, settings.adminToken, access, {
      insecureHttp: !settings.adminTls,
      catalogStatus: deps.catalogStatus,
      onNodeState: events.onNodeState,
      queued: (model) => gateway.queuedFor(model),
      adapters: gateway.adapters,
    }),
  );
  admin.use((req, _res, next) => {
    next(new DomainError('no_route', `no route ${req.method} ${req.path}`));
  });
  admin.use(adminErrors);

  // The heartbeat's lean path first (api/heartbeat.ts); whatever it does not take, express serves.
  const adminServer = await listen((req, res) => agent.lean(req, res) || void admin(req, res), settings.adminAddr, settings, settings.adminTls);
  const clientServer = await listen(gateway.handle, settings.clientAddr, settings, settings.clientTls);
  const catalogNow = catalogInfo(controller, deps.catalogStatus);
  const cluster =
    pgStore && lease && limits && controller instanceof SharedController
      ? await startCluster({
          store: pgStore,
          databaseUrl: settings.databaseUrl!,
          lease,
          limits,
          controller,
          keys,
          access,
          credentials,
          events: events.events,
          joinToken: settings.joinTokenFile !== undefined ? joinToken : undefined,
          log,
          instanceId,
          adminUrl: urlOf(adminServer),
          clientUrl: urlOf(clientServer),
          info: { version: SERVER_VERSION, store: 'postgres', catalog: catalogNow() },
          catalog: catalogNow,
        })
      : undefined;
  const startedAtMs = Date.now();
  status = cluster
    ? () => readClusterStatus(cluster.registry, pgStore!.pool)
    : async () =>
        soloStatus({
          id: instanceId,
          startedAtMs,
          adminUrl: urlOf(adminServer),
          clientUrl: urlOf(clientServer),
          version: SERVER_VERSION,
          catalog: catalogNow(),
          nowMs: Date.now(),
        });
  controller.start();
  log.info(
    { admin: urlOf(adminServer), client: urlOf(clientServer), dataDir: settings.dataDir, store: store.kind, instance: instanceId },
    'llmgw-server listening',
  );

  return {
    adminUrl: urlOf(adminServer),
    clientUrl: urlOf(clientServer),
    controller,
    keys,
    instanceId,
    ...(cluster ? { cluster } : {}),
    bodyRoutes: () => [
      ...bodyRoutes(admin.router, 'admin'),
      // The gateway is plain node:http: its table of endpoints, every one a POST read up to --max-body-size.
      ...[...ENDPOINTS].map((path) => ({ listener: 'client' as const, method: 'POST', path, kind: 'json' as const, limitBytes: settings.maxBodyBytes })),
    ],
    async close() {
      controller.stop();
      await cluster?.close();
      inventory.stop();
      const unwritten = await keys.close();
      if (unwritten) log.error({ requests: unwritten }, `store unavailable at shutdown: usage of ${unwritten} requests could not be written`);
      await gateway.close();
      await headers.close();
      for (const s of [adminServer, clientServer]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      await events.events.flush();
      await controller.persist();
      await inventory.persistReports();
      await store.close();
    },
  };
}
