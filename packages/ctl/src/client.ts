import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import got, { HTTPError, RequestError } from 'got';
import { CtlError, asCtlError } from './failure.js';

export interface Connection {
  server: string;
  token?: string;
  /** Which setting supplied the server address, for the "cannot reach" hint. */
  serverFrom: string;
}

/** Where the server keeps a generated admin token when none was set. */
export function defaultTokenFile(): string {
  return path.join(process.env.LLMGW_HOME ?? path.join(os.homedir(), '.llmgw'), 'server', 'admin-token');
}

/** `source` is where commander found --server: 'cli', 'env' or undefined. */
export function resolveConnection(opts: { server?: string; token?: string }, source?: string): Connection {
  const server = (opts.server ?? process.env.LLMGW_SERVER ?? 'http://127.0.0.1:8081').replace(/\/+$/, '');
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
  return { server, serverFrom, ...(token ? { token } : {}) };
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
  if (err instanceof RequestError) {
    return new CtlError(`cannot reach the llmgw server at ${conn.server} (${err.code}); is it running? (address ${conn.serverFrom})`, 'unreachable');
  }
  return asCtlError(err);
}
