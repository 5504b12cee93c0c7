import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServerRotation, instanceDown, isErrorCode, isLoopbackHost, splitServerList, tlsFailureHint, withFailover, type ErrorCode } from '@llmgw/shared';
import { CtlError, answerFailure, asCtlError, refusedWith } from './failure.js';
import { HTTPError, ParseError, RequestError, request, type Reply } from './http.js';

export interface Connection {
  /**
   * The admin addresses (`--server a,b`: instances of one control plane). Sticky: after a
   * failover, the rest of the command (a watch, a drain's progress) stays on the one that works.
   */
  servers: ServerRotation;
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
    throw new CtlError(
      `invalid ${flag} "${server}": ${hostPort ? `a URL needs its scheme: https://${server}` : 'want a URL like https://10.0.0.1:8081'}`,
      'usage',
    );
  }
  if (url.protocol === 'http:') {
    if (!opts.insecureHttp && !isLoopbackHost(url.hostname)) {
      throw new CtlError(
        `refusing plain http to ${url.host}: the admin token would cross the network in clear text; use https://${url.host}, or --insecure-http when a proxy terminates TLS`,
        'usage',
      );
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
export function resolveConnection(
  opts: { server?: string; token?: string; ca?: string; insecureHttp?: boolean },
  source?: string,
  tokenSource?: string,
): Connection {
  const given = opts.server ?? process.env.LLMGW_SERVER ?? 'https://127.0.0.1:8081';
  const servers = splitServerList(given);
  const serverFrom =
    source === 'cli'
      ? 'set by --server'
      : source === 'env' || (!opts.server && process.env.LLMGW_SERVER)
        ? 'set by LLMGW_SERVER'
        : 'the default; set --server or LLMGW_SERVER';
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
    throw new CtlError(
      `the admin token ${tokenFrom ?? ''} has a character an HTTP header cannot carry (a space, or a prefix cut short with …?): set --token or LLMGW_ADMIN_TOKEN to the whole token`,
      'usage',
    );
  }
  if (servers.length === 0) throw new CtlError(`invalid ${flag} "${given}": want a URL like https://10.0.0.1:8081, or several separated by commas`, 'usage');
  // Every address is checked before anything is sent: a bad one is named, not skipped at each failover.
  let ca: string | undefined;
  for (const server of servers) ca = trustFor(server, flag, opts) ?? ca;
  return {
    servers: new ServerRotation(servers),
    serverFrom,
    ...(token ? { token } : {}),
    ...(tokenFrom ? { tokenFrom } : {}),
    ...(noTokenFile && !token ? { noTokenFile } : {}),
    ...(ca ? { ca } : {}),
  };
}

/** A failure that means the instance is not there or not well (`instanceDown`), for `request`'s errors. */
function isDown(err: unknown): boolean {
  if (err instanceof HTTPError) return instanceDown({ status: err.response.statusCode });
  return err instanceof RequestError && instanceDown({ code: err.code });
}

/**
 * The request failed before any of it could reach the server: the connection (TCP, and
 * TLS for https) was never made — refused, unreachable, a connect timeout, a peer gone
 * during the handshake. Only then is a write safe to send to another instance: after
 * that, the instance may have applied it even if no answer came back.
 */
export function sentNothing(err: unknown): boolean {
  if (!(err instanceof RequestError) || err instanceof HTTPError || !isDown(err)) return false;
  const t = err.timings;
  return t.connect === undefined || (err.url.protocol === 'https:' && t.secureConnect === undefined);
}

/**
 * Calls the admin API and turns every failure into one actionable line. With several
 * addresses, a GET moves to the next one on a connection failure, a timeout or a
 * 502/503/504; a write (POST, PATCH, DELETE) only when nothing of it was sent (`sentNothing`),
 * never after a timeout or an error answer, which may come after the write was applied.
 */
export async function call<T>(conn: Connection, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', p: string, body?: unknown): Promise<T> {
  return (await exchange<T>(conn, method, p, body)).body;
}

/** A success's body as JSON: '' for an empty one, a `ParseError` for one that is not JSON (as got's `.json()` read it). */
function parseJson<T>(res: Reply, url: string): T {
  if (res.body === '') return '' as T;
  try {
    return JSON.parse(res.body) as T;
  } catch (err) {
    throw new ParseError(err as Error, res, url);
  }
}

/** The header a paged list carries the next page's cursor in (`?after=`), absent on the last page. */
export const NEXT_CURSOR_HEADER = 'x-next-cursor';

/**
 * Every page of a paged list of the admin API (`GET /api/v1/nodes`), in order: each
 * page asked with `after=` the cursor the one before gave, until a page gives none.
 */
export async function callAll<T>(conn: Connection, p: string): Promise<T[]> {
  const all: T[] = [];
  const sep = p.includes('?') ? '&' : '?';
  let after: string | undefined;
  // Bounded: a server that kept answering with a cursor is not followed for ever.
  for (let page = 0; page < 100_000; page++) {
    const { body, headers } = await exchange<T[]>(conn, 'GET', after === undefined ? p : `${p}${sep}after=${encodeURIComponent(after)}`);
    all.push(...body);
    const next = headers[NEXT_CURSOR_HEADER];
    if (typeof next !== 'string' || !next || next === after || body.length === 0) return all;
    after = next;
  }
  return all;
}

async function exchange<T>(
  conn: Connection,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  p: string,
  body?: unknown,
): Promise<{ body: T; headers: Record<string, string | string[] | undefined> }> {
  if (conn.noTokenFile) {
    const home = process.env.LLMGW_HOME ? ` (LLMGW_HOME=${process.env.LLMGW_HOME})` : '';
    throw new CtlError(
      `no admin token: no token file at ${conn.noTokenFile}${home}; set LLMGW_HOME to the directory the server was started with, or --token / LLMGW_ADMIN_TOKEN`,
      'usage',
    );
  }
  const tried: { url: string; err: unknown }[] = [];
  const attempt = async (url: string): Promise<{ body: T; headers: Record<string, string | string[] | undefined> }> => {
    try {
      const res = await request(`${url}/api/v1${p}`, {
        method,
        ...(body !== undefined ? { json: body } : {}),
        headers: { accept: 'application/json', ...(conn.token ? { authorization: `Bearer ${conn.token}` } : {}) },
        // A host that is down drops the SYN: the next address is tried after 5 s, not 15.
        connectTimeoutMs: 5_000,
        requestTimeoutMs: 15_000,
        ...(conn.ca ? { ca: conn.ca } : {}),
      });
      return { body: parseJson<T>(res, url), headers: res.headers };
    } catch (err) {
      tried.push({ url, err });
      throw err;
    }
  };
  try {
    return await withFailover(conn.servers, attempt, method === 'GET' ? isDown : sentNothing);
  } catch (err) {
    const e = toCtlError(err, conn, `${method} /api/v1${p.replace(/\?.*/, '')}`, tried);
    // Said so the operator checks before running it again: it may have been applied.
    if (method !== 'GET' && conn.servers.urls.length > 1 && isDown(err) && !sentNothing(err)) {
      const at = tried.at(-1)?.url ?? conn.servers.current;
      throw new CtlError(
        `${e.message} (not repeated on another server: ${at} may have applied it; check before running it again)`,
        e.failure,
        e.status,
        e.code,
      );
    }
    throw e;
  }
}

/**
 * The `error` and `code` of an answer: `error` a string from llmgw's admin API (with our
 * `code` beside it), an object from an OpenAI-compatible API; a code that is not one of
 * ours (a newer server's, another program's) is as good as none.
 */
function errorOf(body: unknown): { error: unknown; code?: ErrorCode } {
  try {
    const b = JSON.parse(String(body)) as { error?: unknown; code?: unknown } | null;
    return { error: b?.error, ...(isErrorCode(b?.code) ? { code: b.code } : {}) };
  } catch {
    return { error: undefined };
  }
}

function toCtlError(err: unknown, conn: Connection, what: string, tried: readonly { url: string; err: unknown }[]): CtlError {
  const server = tried.at(-1)?.url ?? conn.servers.current;
  if (err instanceof HTTPError) {
    const status = err.response.statusCode;
    const { error, code } = errorOf(err.response.body);
    if (error !== null && typeof error === 'object') {
      // OpenAI's error shape: --server is the client listener, which knows no admin token.
      return new CtlError(
        `${server} is llmgw's client (OpenAI-compatible) address, not its admin API: point --server or LLMGW_SERVER at the admin address (https://127.0.0.1:8081 by default; the server logs both as "llmgw-server listening")`,
      );
    }
    const failure = answerFailure(code, status);
    if (typeof error !== 'string' || !error) {
      const guess = failure === 'unreachable' ? 'a proxy in front of a server that does not answer, or not' : 'is it';
      return new CtlError(
        `${server} answered ${status} to ${what} without llmgw's error body: ${guess} llmgw's admin address? (address ${conn.serverFrom})`,
        failure,
        status,
      );
    }
    const refused = new CtlError(error, failure, status, code);
    if (refusedWith(refused, 'unauthenticated', 401)) {
      return new CtlError(
        `${server} rejected the admin token${conn.tokenFrom ? ` ${conn.tokenFrom}` : ''} (${error}): set --token or LLMGW_ADMIN_TOKEN to the server's admin token`,
        failure,
        status,
        code,
      );
    }
    return refused;
  }
  const tls = err instanceof RequestError ? tlsFailureHint(err.code, server, `--ca FILE (LLMGW_CA; default ${defaultCaFile()})`) : undefined;
  if (tls) return new CtlError(tls);
  if (err instanceof RequestError) {
    const unreachable = tried.filter((t) => t.err instanceof RequestError && !(t.err instanceof HTTPError));
    if (unreachable.length > 1) {
      const each = unreachable.map((t) => `${t.url} (${(t.err as RequestError).code})`).join(', ');
      return new CtlError(`cannot reach any llmgw server: ${each}; are they running? (addresses ${conn.serverFrom})`, 'unreachable');
    }
    return new CtlError(`cannot reach the llmgw server at ${server} (${err.code}); is it running? (address ${conn.serverFrom})`, 'unreachable');
  }
  return asCtlError(err);
}
