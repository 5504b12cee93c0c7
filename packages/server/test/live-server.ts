import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { parseCatalog } from '../src/catalog/parse.js';
import { startServer, type ConnectionLimits, type RunningServer } from '../src/server.js';
import { adminTls } from '../src/tls/index.js';
import { SqliteStore } from '../src/store/sqlite.js';
import { nodeAuth, seedCredential } from './credentials.js';
import { defaultTuning } from '../src/settings.js';
import type { ServerSettings } from '../src/server.js';

/**
 * A real llmgw server in-process on 127.0.0.1:0 with a fresh data directory, one node
 * that has reported, and one API key: what the hostile-input and connection tests aim at.
 */

export const ADMIN = 'test-admin-token';
export const JOIN = 'test-join-token';

const CATALOG = `models:
  - name: cold
    source: /models/cold.gguf
    scaling: { min: 0, max: 1 }
    profiles:
      - { name: cpu, engine: llama.cpp, min_memory_gb: 1 }
`;

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** The CA each live server's admin listener is verified with, by origin. */
const caByOrigin = new Map<string, string>();

/** The CA that `base`'s certificate chains to, for raw TLS sockets; undefined for plain HTTP. */
export function caOf(base: string): string | undefined {
  return caByOrigin.get(new URL(base).origin);
}

/** One HTTP(S) request with nothing normalised: any method, any path, any bytes. */
export function send(base: string, r: RawRequest): Promise<Reply> {
  const url = new URL(base);
  const ca = caOf(base);
  const request =
    url.protocol === 'https:'
      ? (o: https.RequestOptions, cb: (res: http.IncomingMessage) => void) => https.request({ ...o, ...(ca ? { ca } : {}) }, cb)
      : http.request;
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method: r.method ?? 'GET', path: r.path, headers: r.headers ?? {}, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

export const adminAuth = { authorization: `Bearer ${ADMIN}` };
/** The headers of a JSON body. */
export const jsonHeaders = { 'content-type': 'application/json' };
/** The Authorization header for a token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
export { nodeAuth };

/** A heartbeat a real agent could send. */
export function heartbeat(nodeId = 'node-a', extra: Record<string, unknown> = {}) {
  return {
    report: {
      node_id: nodeId,
      hostname: nodeId,
      mgmt_addr: '127.0.0.1',
      agent_version: '0.1.0',
      labels: { rack: 'r1' },
      memory_total_mb: 4096,
      cpu_cores: 4,
      gpus: [],
      fabrics: ['ethernet'],
      ...extra,
    },
    shards: [],
  };
}

export interface LiveServer {
  running: RunningServer;
  dataDir: string;
  admin: string;
  client: string;
  apiKey: string;
  /** The session cookie and CSRF token of a dashboard login. */
  login(): Promise<{ cookie: string; csrf: string }>;
  /** What the admin API says the state is: nodes, replicas, keys. */
  state(): Promise<string>;
  close(): Promise<void>;
}

/** `settings` overrides the server's; without `--allow-loopback-nodes` node-a reports `node-a.invalid`. */
export async function liveServer(connections: Partial<ConnectionLimits & ServerSettings> = {}, settings: Partial<ServerSettings> = {}): Promise<LiveServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-live-'));
  const log = pino({ level: 'silent' });
  // TLS as a real server starts: the CA and certificate made in the data directory.
  const tls = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [] }, log);
  // node-a has joined: the agent API takes its credential (nodeAuth), not the join token.
  const seed = new SqliteStore(dataDir);
  await seedCredential(seed, 'node-a');
  await seed.close();
  const running = await startServer(
    makeServerSettings(dataDir, { adminToken: ADMIN, joinToken: JOIN, ...connections, adminTls: tls, ...settings }),
    parseCatalog(CATALOG, 'catalog.yaml'),
    log,
  );
  const admin = running.adminUrl;
  caByOrigin.set(new URL(admin).origin, tls.caPem);
  const hb = await send(admin, {
    method: 'POST',
    path: '/agent/v1/heartbeat',
    headers: { ...nodeAuth, ...jsonHeaders },
    body: JSON.stringify(heartbeat('node-a', settings.allowLoopbackNodes === false ? { mgmt_addr: 'node-a.invalid' } : {})),
  });
  if (hb.status !== 200) throw new Error(`setup heartbeat: ${hb.status} ${hb.body}`);
  const key = await send(admin, { method: 'POST', path: '/api/v1/keys', headers: { ...adminAuth, ...jsonHeaders }, body: JSON.stringify({ name: 'k' }) });
  const apiKey = (JSON.parse(key.body) as { secret: string }).secret;
  return {
    running,
    dataDir,
    admin,
    client: running.clientUrl,
    apiKey,
    async login() {
      const r = await send(admin, { method: 'POST', path: '/login', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${ADMIN}` });
      const cookie = String(r.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
      const page = await send(admin, { path: '/', headers: { cookie } });
      const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      return { cookie, csrf };
    },
    async state() {
      const parts: unknown[] = [];
      for (const p of ['/api/v1/nodes', '/api/v1/replicas', '/api/v1/keys']) {
        const r = await send(admin, { path: p, headers: adminAuth });
        // How long ago a node was seen moves on by itself; everything else must not.
        parts.push(JSON.parse(r.body, (k, v: unknown) => (k === 'last_seen_s' ? undefined : v)));
      }
      return JSON.stringify(parts);
    },
    async close() {
      await running.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Settings for a server started in a test: loopback on port 0, short timers; override what the test is about. */
export function makeServerSettings(dataDir: string, overrides: Partial<ServerSettings> = {}): ServerSettings {
  return {
    ...defaultTuning(),
    clientAddr: '127.0.0.1:0',
    adminAddr: '127.0.0.1:0',
    // Test agents are on this machine: their engines are at 127.0.0.1.
    allowLoopbackNodes: true,
    adminToken: 'admin',
    joinToken: 'join',
    dataDir,
    notReadyAfterMs: 600_000,
    lostAfterMs: 3_600_000,
    reconcileIntervalMs: 60_000,
    failedBackoffMs: 30_000,
    maxBodyBytes: 1 << 20,
    upstreamTimeoutMs: 5000,
    cooldownMs: 1000,
    keepAliveMs: 200,
    drainParallel: 1,
    minHealthyMs: 0,
    drainTimeoutMs: 5000,
    maxLostFraction: 0.5,
    coldStartTimeoutMs: 3000,
    streamIdleTimeoutMs: 60_000,
    ...overrides,
  };
}
