import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import got, { HTTPError, RequestError } from 'got';
import { tlsFailureHint } from '@llmgw/shared';
import { CtlError, asCtlError } from './failure.js';

export interface Connection {
  server: string;
  token?: string;
  /** The CA (PEM) the server's certificate must chain to, alone; absent = the system's CAs. */
  ca?: string;
  /** Which setting supplied the server address, for the "cannot reach" hint. */
  serverFrom: string;
}

/** Where the server keeps a generated admin token when none was set. */
export function defaultTokenFile(): string {
  return path.join(process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw'), 'server', 'admin-token');
}

/** Where a local server keeps the CA it generated, found like its admin token. */
export function defaultCaFile(): string {
  return path.join(process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw'), 'server', 'tls', 'ca.pem');
}

const LOOPBACK = /^(localhost|127\.[0-9.]+|\[::1\])$/;

/**
 * The CA to verify the server with: `--ca`/`LLMGW_CA`, else a local server's generated
 * CA when there is one, else none (the system's CAs, for an operator's certificate).
 * Plain http to another machine is refused unless `--insecure-http`: the admin token
 * would cross the network in clear text.
 */
function trustFor(server: string, opts: { ca?: string; insecureHttp?: boolean }): string | undefined {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new CtlError(`invalid --server "${server}": want a URL like https://10.0.0.1:8081`, 'usage');
  }
  if (url.protocol === 'http:') {
    if (!opts.insecureHttp && !LOOPBACK.test(url.hostname)) {
      throw new CtlError(`refusing plain http to ${url.host}: the admin token would cross the network in clear text; use https://${url.host}, or --insecure-http when a proxy terminates TLS`, 'usage');
    }
    return undefined;
  }
  const file = opts.ca ?? process.env.LLMGW_CA;
  if (file) {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new CtlError(`cannot read --ca ${file}: ${(err as Error).message}`, 'usage');
    }
  }
  try {
    return fs.readFileSync(defaultCaFile(), 'utf8');
  } catch {
    return undefined;
  }
}

/** `source` is where commander found --server: 'cli', 'env' or undefined. */
export function resolveConnection(opts: { server?: string; token?: string; ca?: string; insecureHttp?: boolean }, source?: string): Connection {
  const server = (opts.server ?? process.env.LLMGW_SERVER ?? 'https://127.0.0.1:8081').replace(/\/+$/, '');
  const serverFrom =
    source === 'cli' ? 'set by --server' : source === 'env' || (!opts.server && process.env.LLMGW_SERVER) ? 'set by LLMGW_SERVER' : 'the default; set --server or LLMGW_SERVER';
  let token = opts.token ?? process.env.LLMGW_ADMIN_TOKEN;
  if (!token) {
    try {
      token = fs.readFileSync(defaultTokenFile(), 'utf8').trim() || undefined;
    } catch {
      /* no local token file: the request will say 401 */
    }
  }
  const ca = trustFor(server, opts);
  return { server, serverFrom, ...(token ? { token } : {}), ...(ca ? { ca } : {}) };
}

/** Calls the admin API and turns every failure into one actionable line. */
export async function call<T>(conn: Connection, method: 'GET' | 'POST' | 'DELETE', p: string, body?: unknown): Promise<T> {
  try {
    return await got(`${conn.server}/api/v1${p}`, {
      method,
      ...(body !== undefined ? { json: body } : {}),
      headers: conn.token ? { authorization: `Bearer ${conn.token}` } : {},
      timeout: { request: 15_000 },
      retry: { limit: 0 },
      ...(conn.ca ? { https: { certificateAuthority: conn.ca } } : {}),
    }).json<T>();
  } catch (err) {
    throw toCtlError(err, conn);
  }
}

function toCtlError(err: unknown, conn: Connection): CtlError {
  if (err instanceof HTTPError) {
    const status = err.response.statusCode;
    let msg: string;
    try {
      msg = (JSON.parse(String(err.response.body)) as { error?: string }).error ?? '';
    } catch {
      msg = String(err.response.body).slice(0, 200);
    }
    if (status === 401) {
      return new CtlError(`${conn.server} rejected the admin token (${msg || 'unauthorized'}): set --token or LLMGW_ADMIN_TOKEN to the server's admin token`);
    }
    return new CtlError(msg || `the server answered ${status}`);
  }
  const tls = err instanceof RequestError ? tlsFailureHint(err.code, conn.server, `--ca FILE (LLMGW_CA; default ${defaultCaFile()})`) : undefined;
  if (tls) return new CtlError(tls);
  if (err instanceof RequestError) {
    return new CtlError(`cannot reach the llmgw server at ${conn.server} (${err.code}); is it running? (address ${conn.serverFrom})`, 'unreachable');
  }
  return asCtlError(err);
}
