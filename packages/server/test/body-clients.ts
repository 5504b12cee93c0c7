import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { Agent, fetch } from 'undici';
import { caOf } from './live-server.js';

/**
 * The three ways the 413 matrix (body-limits.test.ts) sends a body, each as a client that
 * writes its whole body before it reads: Node's http client, fetch (undici), and a raw
 * socket that reads nothing until every byte is handed to the kernel. Each resolves with
 * the status and body it read and the first error it saw, never rejects.
 */

export type Transfer = 'content-length' | 'chunked';
export type ClientName = 'node' | 'fetch' | 'socket';

export interface Sent {
  base: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  transfer: Transfer;
}

export interface Got {
  status?: number;
  contentType?: string;
  body?: string;
  error?: string;
}

/** Pieces a chunked body is written in: many, as a streaming client writes them. */
const CHUNK = 256 * 1024;
/** Longer than any answer here takes, shorter than jest's timeout: a hang is a failure with a name. */
const HANG_MS = 20_000;

function pieces(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += CHUNK) out.push(body.subarray(i, i + CHUNK));
  return out;
}

const errorCode = (e: unknown): string => {
  const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
  return err.cause?.code ?? err.code ?? err.cause?.message ?? err.message;
};

/** Node's http client, as SDKs use it: no agent (so `Connection: close`), the whole body written at once. */
export function nodeSend(s: Sent): Promise<Got> {
  const url = new URL(s.base);
  const ca = caOf(s.base);
  const request = url.protocol === 'https:' ? https.request : http.request;
  const headers = { ...s.headers, ...(s.transfer === 'content-length' ? { 'content-length': String(s.body.length) } : {}) };
  return new Promise((resolve) => {
    const got: Got = {};
    const timer = setTimeout(() => resolve({ ...got, error: got.error ?? 'no answer in time' }), HANG_MS);
    const done = () => {
      clearTimeout(timer);
      resolve(got);
    };
    const req = request({ host: url.hostname, port: url.port, method: s.method, path: s.path, headers, agent: false, ...(ca ? { ca } : {}) }, (res) => {
      got.status = res.statusCode;
      got.contentType = res.headers['content-type'];
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('close', () => {
        got.body = Buffer.concat(chunks).toString('utf8');
        if (!res.complete) got.error ??= 'answer cut short';
        done();
      });
    });
    req.on('error', (e) => {
      got.error ??= errorCode(e);
      if (got.status === undefined) done();
    });
    if (s.transfer === 'content-length') req.end(s.body);
    else {
      for (const p of pieces(s.body)) req.write(p);
      req.end();
    }
  });
}

const dispatchers = new Map<string, Agent>();
/** One undici pool per origin, trusting the admin listener's CA: kept-alive connections, as fetch uses them. */
function dispatcherFor(base: string): Agent {
  const origin = new URL(base).origin;
  let d = dispatchers.get(origin);
  if (!d) {
    const ca = caOf(base);
    d = new Agent({ connect: ca ? { ca } : {} });
    dispatchers.set(origin, d);
  }
  return d;
}

/** Closes the pools `fetchSend` opened. */
export async function closeFetch(): Promise<void> {
  await Promise.all([...dispatchers.values()].map((d) => d.close()));
  dispatchers.clear();
}

/** fetch (undici): a Buffer is sent with Content-Length, an async iterable chunked. */
export async function fetchSend(s: Sent): Promise<Got> {
  const body =
    s.transfer === 'content-length'
      ? s.body
      : (async function* () {
          for (const p of pieces(s.body)) yield p;
        })();
  try {
    const res = await fetch(new URL(s.path, s.base), {
      method: s.method,
      headers: s.headers,
      body,
      duplex: 'half',
      dispatcher: dispatcherFor(s.base),
      signal: AbortSignal.timeout(HANG_MS),
    });
    return { status: res.status, contentType: res.headers.get('content-type') ?? undefined, body: await res.text() };
  } catch (e) {
    return { error: errorCode(e) };
  }
}

/** A body framed as chunked transfer coding. */
function chunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (const p of pieces(body)) parts.push(Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n'));
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** The body of a raw HTTP/1.1 answer, de-chunked when it is chunked. */
function bodyOf(head: string, rest: Buffer): Buffer {
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return rest;
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = rest.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(rest.subarray(at, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(rest.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/**
 * A raw socket that writes the whole request, waits until every byte is handed to the
 * kernel, and only then reads: the client a reset hurts most.
 */
export function socketSend(s: Sent): Promise<Got> {
  const url = new URL(s.base);
  const framing = s.transfer === 'content-length' ? `Content-Length: ${s.body.length}` : 'Transfer-Encoding: chunked';
  const head =
    `${s.method} ${s.path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n${framing}\r\n` +
    Object.entries(s.headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n';
  const payload = s.transfer === 'content-length' ? s.body : chunked(s.body);
  return new Promise((resolve) => {
    const ca = caOf(s.base);
    const sock: net.Socket =
      url.protocol === 'https:'
        ? tls.connect({ port: Number(url.port), host: url.hostname, ...(ca ? { ca } : {}) })
        : net.connect(Number(url.port), url.hostname);
    sock.pause();
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const timer = setTimeout(() => sock.destroy(new Error('no answer in time')), HANG_MS);
    sock.on('error', (e) => (error ??= errorCode(e)));
    sock.on('close', () => {
      clearTimeout(timer);
      const reply = Buffer.concat(chunks);
      const end = reply.indexOf('\r\n\r\n');
      const headText = end < 0 ? reply.toString('latin1') : reply.subarray(0, end).toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(headText)?.[1];
      const contentType = /\r\ncontent-type: *([^\r]*)/i.exec(headText)?.[1];
      resolve({
        ...(status ? { status: Number(status) } : {}),
        ...(contentType ? { contentType } : {}),
        ...(end >= 0 ? { body: bodyOf(headText, reply.subarray(end + 4)).toString('utf8') } : {}),
        ...(error ? { error } : {}),
      });
    });
    sock.write(head);
    sock.write(payload, () => {
      sock.on('data', (c: Buffer) => chunks.push(c));
      sock.resume();
    });
  });
}

export const CLIENTS: Record<ClientName, (s: Sent) => Promise<Got>> = { node: nodeSend, fetch: fetchSend, socket: socketSend };
