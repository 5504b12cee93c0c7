import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Logger } from 'pino';
import { adminApi } from './api/admin.js';
import { agentApi } from './api/agent.js';
import { Controller, type CatalogView } from './controller/controller.js';
import { dashboard } from './dashboard/dashboard.js';
import { Gateway } from './gateway/gateway.js';
import { adminErrors, requireToken } from './api/http.js';
import { DomainError } from './errors.js';
import { Inventory } from './inventory.js';
import { KeyRing } from './gateway/keys.js';
import { Metrics } from './metrics.js';
import { SqliteStore } from './store/sqlite.js';

export interface ServerSettings {
  clientAddr: string;
  adminAddr: string;
  adminToken: string;
  joinToken: string;
  dataDir: string;
  notReadyAfterS: number;
  lostAfterS: number;
  reconcileIntervalS: number;
  failedBackoffS: number;
  maxBodyBytes: number;
  upstreamTimeoutS: number;
  cooldownS: number;
  keepAliveS: number;
  drainParallel: number;
  minHealthyS: number;
  drainTimeoutS: number;
  maxLostFraction: number;
  coldStartTimeoutS: number;
  /** Longest silence of an engine mid-stream; the stream then ends with an error event. */
  streamIdleTimeoutS: number;
}

export interface RunningServer {
  adminUrl: string;
  clientUrl: string;
  controller: Controller;
  keys: KeyRing;
  close(): Promise<void>;
}

/** `127.0.0.1:8081` → host and port; `:8081` listens on every address. */
export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`invalid address "${addr}": want HOST:PORT, e.g. 127.0.0.1:8081`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port: Number(m[3]) };
}

function listen(app: http.RequestListener, addr: string): Promise<http.Server> {
  const { host, port } = parseAddr(addr);
  const server = http.createServer(app);
  // Long-polls and streams outlive Node's default request timeout.
  server.requestTimeout = 0;
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

function urlOf(server: http.Server): string {
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address === '0.0.0.0' ? '127.0.0.1' : a.address;
  return `http://${host}:${a.port}`;
}

/** Starts both listeners over one controller. Used by main and by in-process tests. */
export async function startServer(settings: ServerSettings, catalog: CatalogView, log: Logger): Promise<RunningServer> {
  const store = new SqliteStore(settings.dataDir);
  const inventory = new Inventory(store, { notReadyAfterS: settings.notReadyAfterS, lostAfterS: settings.lostAfterS });
  const controller = new Controller(
    inventory,
    store,
    catalog,
    {
      reconcileIntervalMs: settings.reconcileIntervalS * 1000,
      failedBackoffMs: settings.failedBackoffS * 1000,
      drainParallel: settings.drainParallel,
      minHealthyMs: settings.minHealthyS * 1000,
      drainTimeoutMs: settings.drainTimeoutS * 1000,
      maxLostFraction: settings.maxLostFraction,
    },
    log,
  );

  const keys = new KeyRing(store);
  const metrics = new Metrics();
  const gateway = new Gateway(
    controller,
    keys,
    metrics,
    {
      maxBodyBytes: settings.maxBodyBytes,
      upstreamTimeoutMs: settings.upstreamTimeoutS * 1000,
      cooldownMs: settings.cooldownS * 1000,
      keepAliveMs: settings.keepAliveS * 1000,
      coldStartTimeoutMs: settings.coldStartTimeoutS * 1000,
      streamIdleTimeoutMs: settings.streamIdleTimeoutS * 1000,
    },
    log,
  );
  controller.setLoadSource(gateway);

  const admin = express();
  admin.disable('x-powered-by');
  admin.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  admin.use('/agent/v1', requireToken(settings.joinToken, 'join token'), agentApi(controller));
  admin.use('/api/v1', requireToken(settings.adminToken, 'admin token'), adminApi(controller, keys));
  admin.get('/metrics', requireToken(settings.adminToken, 'admin token'), async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  admin.use('/', dashboard(controller, keys, settings.adminToken));
  admin.use((req, _res, next) => {
    next(new DomainError('no_route', `no route ${req.method} ${req.path}`));
  });
  admin.use(adminErrors);

  const adminServer = await listen(admin, settings.adminAddr);
  const clientServer = await listen(gateway.handle, settings.clientAddr);
  controller.start();
  log.info({ admin: urlOf(adminServer), client: urlOf(clientServer), dataDir: settings.dataDir }, 'llmgw-server listening');

  return {
    adminUrl: urlOf(adminServer),
    clientUrl: urlOf(clientServer),
    controller,
    keys,
    async close() {
      controller.stop();
      keys.close();
      await gateway.close();
      for (const s of [adminServer, clientServer]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      store.close();
    },
  };
}
