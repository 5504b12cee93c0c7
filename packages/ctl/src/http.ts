import http from 'node:http';
import https from 'node:https';

/**
 * One request to the admin API over Node's own http(s), in place of got: loading got
 * cost ctl about 65 ms per call, two thirds of a bare `node -e 0` (issue 32), for a
 * client that sends one JSON request at a time with two timeouts and no retries.
 * The errors keep got's shape, which the failover rules read: a `RequestError` with
 * the socket's `code` and whether the connection was made, an `HTTPError` for an answer
 * outside 2xx.
 */

export interface Reply {
  statusCode: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  method: string;
  headers?: Record<string, string>;
  /** Sent as JSON, with its content-type. */
  json?: unknown;
  /** The CA (PEM) the server's certificate must chain to; absent = the system's CAs. */
  ca?: string;
  /** From the socket being given to the request to its TCP connection, a DNS lookup included (got's `timeout.connect` without one). */
  connectTimeoutMs?: number;
  /** The whole exchange, the answer's body read (got's `timeout.request`). */
  requestTimeoutMs?: number;
}

/** How far the connection got before a failure: `connect` and `secureConnect` as got's timings name them. */
export interface Timings {
  connect?: number;
  secureConnect?: number;
}

export class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly url: URL,
    readonly timings: Timings,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

/** An answer outside 2xx: the request reached the server, which refused it. */
export class HTTPError extends RequestError {
  constructor(
    readonly response: Reply,
    url: URL,
    timings: Timings,
  ) {
    super(`Response code ${response.statusCode}`, `ERR_NON_2XX_3XX_RESPONSE`, url, timings);
    this.name = 'HTTPError';
  }
}

/** A 2xx answer whose body is not JSON. */
export class ParseError extends Error {
  constructor(
    cause: Error,
    readonly response: Reply,
    url: string,
  ) {
    super(`${url} answered ${response.statusCode} with a body that is not JSON (${cause.message})`);
    this.name = 'ParseError';
  }
}

export function request(target: string, o: RequestOptions): Promise<Reply> {
  const url = new URL(target);
  const lib = url.protocol === 'https:' ? https : http;
  const body = o.json === undefined ? undefined : JSON.stringify(o.json);
  const headers: Record<string, string | number> = { ...o.headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = Buffer.byteLength(body);
  }
  const timings: Timings = {};
  const start = Date.now();
  return new Promise<Reply>((resolve, reject) => {
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (err: Error | undefined, reply?: Reply) => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      if (err) reject(err);
      else resolve(reply!);
    };
    const fail = (err: NodeJS.ErrnoException) => finish(new RequestError(err.message, err.code ?? 'ERR_REQUEST_ERROR', url, timings));
    const timeout = (ms: number, what: string) => {
      const t = setTimeout(() => {
        const err = Object.assign(new Error(`Timeout awaiting '${what}' for ${ms}ms`), { code: 'ETIMEDOUT' });
        fail(err);
        req.destroy(err);
      }, ms);
      timers.push(t);
      return t;
    };
    const req = lib.request(url, { method: o.method, headers, ...(o.ca ? { ca: o.ca } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        const reply = { statusCode: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') };
        finish(reply.statusCode >= 200 && reply.statusCode < 300 ? undefined : new HTTPError(reply, url, timings), reply);
      });
    });
    req.on('error', fail);
    if (o.requestTimeoutMs !== undefined) timeout(o.requestTimeoutMs, 'request');
    req.on('socket', (socket) => {
      // A kept-alive socket of an earlier page is connected already.
      if (!socket.connecting) {
        timings.connect = timings.secureConnect = Date.now() - start;
        return;
      }
      const connect = o.connectTimeoutMs === undefined ? undefined : timeout(o.connectTimeoutMs, 'connect');
      socket.once('connect', () => {
        timings.connect = Date.now() - start;
        if (connect) clearTimeout(connect);
      });
      socket.once('secureConnect', () => {
        timings.secureConnect = Date.now() - start;
      });
    });
    req.end(body);
  });
}
