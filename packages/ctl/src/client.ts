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
  /** Which setting supplied the token, for the "rejected" hint. */
  tokenFrom?: string;
  /** No token was given and none is in this file: said before anything is sent. */
  noTokenFile?: string;
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
function trustFor(server: string, flag: string, opts: { ca?: string; insecureHttp?: boolean }): string | undefined {
  let url: URL | undefined;
  try {
    url = new URL(server);
  } catch {
    /* said below */
  }
  // `localhost:8081` parses as a URL of scheme "localhost:"; only http(s) is an address.
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    const hostPort = /^[\w.-]+:\d+$|^\[[\d:a-f]+\]:\d+$/i.test(server);
    throw new CtlError(`invalid ${flag} "${server}": ${hostPort ? `a URL needs its scheme: https://${server}` : 'want a URL like https://10.0.0.1:8081'}`, 'usage');
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

/** `source` and `tokenSource` are where commander found --server and --token: 'cli', 'env' or undefined. */
export function resolveConnection(opts: { server?: string; token?: string; ca?: string; insecureHttp?: boolean }, source?: string, tokenSource?: string): Connection {
  const server = (opts.server ?? process.env.LLMGW_SERVER ?? 'https://127.0.0.1:8081').replace(/\/+$/, '');
  const serverFrom =
    source === 'cli' ? 'set by --server' : source === 'env' || (!opts.server && process.env.LLMGW_SERVER) ? 'set by LLMGW_SERVER' : 'the default; set --server or LLMGW_SERVER';
  const flag = serverFrom === 'set by LLMGW_SERVER' ? 'LLMGW_SERVER' : '--server';
  let token = opts.token ?? process.env.LLMGW_ADMIN_TOKEN;
  // commander fills opts.token from LLMGW_ADMIN_TOKEN too: only its source tells them apart.
  let tokenFrom = opts.token && tokenSource !== 'env' ? 'given by --token' : token ? 'in LLMGW_ADMIN_TOKEN' : undefined;
  let noTokenFile: string | undefined;
  if (!token) {
    const file = defaultTokenFile();
    try {
      token = fs.readFileSync(file, 'utf8').trim() || undefined;
      tokenFrom = `in ${file}`;
    } catch {
      // Said when a command calls the server, so that help and `ctl version --client` work.
      noTokenFile = file;
    }
  }
  // Else fetch fails with ERR_INVALID_CHAR, which reads as an unreachable server.
  if (token && !/^[\x21-\x7e]+$/.test(token)) {
    throw new CtlError(`the admin token ${tokenFrom ?? ''} has a character an HTTP header cannot carry (a space, or a prefix cut short with …?): set --token or LLMGW_ADMIN_TOKEN to the whole token`, 'usage');
  }
  const ca = trustFor(server, flag, opts);
  return { server, serverFrom, ...(token ? { token } : {}), ...(tokenFrom ? { tokenFrom } : {}), ...(noTokenFile && !token ? { noTokenFile } : {}), ...(ca ? { ca } : {}) };
}

/** Calls the admin API and turns every failure into one actionable line. */
export async function call<T>(conn: Connection, method: 'GET' | 'POST' | 'DELETE', p: string, body?: unknown): Promise<T> {
  if (conn.noTokenFile) {
    const home = process.env.LLMGW_HOME ? ` (LLMGW_HOME=${process.env.LLMGW_HOME})` : '';
    throw new CtlError(`no admin token: no token file at ${conn.noTokenFile}${home}; set LLMGW_HOME to the directory the server was started with, or --token / LLMGW_ADMIN_TOKEN`, 'usage');
  }
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
    throw toCtlError(err, conn, `${method} /api/v1${p.replace(/\?.*/, '')}`);
  }
}

/** The `error` of an answer: a string from llmgw's admin API, an object from an OpenAI-compatible API. */
function errorOf(body: unknown): unknown {
  try {
    return (JSON.parse(String(body)) as { error?: unknown } | null)?.error;
  } catch {
    return undefined;
  }
}

function toCtlError(err: unknown, conn: Connection, what: string): CtlError {
  if (err instanceof HTTPError) {
    const status = err.response.statusCode;
    const error = errorOf(err.response.body);
    if (error !== null && typeof error === 'object') {
      // OpenAI's error shape: --server is the client listener, which knows no admin token.
      return new CtlError(`${conn.server} is llmgw's client (OpenAI-compatible) address, not its admin API: point --server or LLMGW_SERVER at the admin address (https://127.0.0.1:8081 by default; the server logs both as "llmgw-server listening")`);
    }
    if (typeof error !== 'string' || !error) {
      return new CtlError(`${conn.server} answered ${status} to ${what} without llmgw's error body: is it llmgw's admin address? (address ${conn.serverFrom})`);
    }
    if (status === 401) {
      return new CtlError(`${conn.server} rejected the admin token${conn.tokenFrom ? ` ${conn.tokenFrom}` : ''} (${error}): set --token or LLMGW_ADMIN_TOKEN to the server's admin token`);
    }
    return new CtlError(error, 'failed', status);
  }
  const tls = err instanceof RequestError ? tlsFailureHint(err.code, conn.server, `--ca FILE (LLMGW_CA; default ${defaultCaFile()})`) : undefined;
  if (tls) return new CtlError(tls);
  if (err instanceof RequestError) {
    return new CtlError(`cannot reach the llmgw server at ${conn.server} (${err.code}); is it running? (address ${conn.serverFrom})`, 'unreachable');
  }
  return asCtlError(err);
}
