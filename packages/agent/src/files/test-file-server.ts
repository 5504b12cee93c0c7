import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** How the test file server misbehaves; every field off by default. */
export interface FileServerOptions {
  /** Bytes per write, and the pause after each: a throttled server. */
  chunkBytes?: number;
  pauseMs?: number;
  /** The first answer's connection is dropped after this many body bytes. */
  dropAfter?: number;
  /** No Content-Length (chunked). */
  noLength?: boolean;
  /** Answers 200 with the whole file to a Range request. */
  ignoreRange?: boolean;
  /** Answers this status (no body) to every request. */
  status?: number;
}

/** One request as the server saw it. */
export interface SeenRequest {
  url: string;
  range?: string;
  headers: http.IncomingHttpHeaders;
}

/** A real HTTP file server on 127.0.0.1:0 serving `body` at every path, with Range support. */
export async function fileServer(body: Buffer, o: FileServerOptions = {}) {
  const seen: SeenRequest[] = [];
  let answers = 0;
  const srv = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', ...(req.headers.range ? { range: req.headers.range } : {}), headers: req.headers });
    if (o.status) {
      res.writeHead(o.status).end();
      return;
    }
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    let start = 0;
    if (m && !o.ignoreRange) {
      start = Number(m[1]);
      if (start >= body.length) {
        res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
        return;
      }
      res.writeHead(206, {
        'content-range': `bytes ${start}-${body.length - 1}/${body.length}`,
        ...(o.noLength ? {} : { 'content-length': body.length - start }),
      });
    } else {
      res.writeHead(200, o.noLength ? {} : { 'content-length': body.length });
    }
    const drop = answers++ === 0 ? o.dropAfter : undefined;
    void send(res, body.subarray(start), o, drop);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { url, seen, sha256: createHash('sha256').update(body).digest('hex'), close: () => new Promise<void>((r) => srv.close(() => r())) };
}

async function send(res: http.ServerResponse, data: Buffer, o: FileServerOptions, dropAfter: number | undefined): Promise<void> {
  const step = o.chunkBytes ?? data.length;
  for (let at = 0; at < data.length; at += step) {
    let chunk = data.subarray(at, at + step);
    if (dropAfter !== undefined && at + chunk.length >= dropAfter) {
      chunk = chunk.subarray(0, dropAfter - at);
      await new Promise<void>((r) => res.write(chunk, () => r()));
      res.socket?.destroy();
      return;
    }
    await new Promise<void>((r) => res.write(chunk, () => r()));
    if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
  }
  res.end();
}

/** A forward proxy that tunnels CONNECT requests, recording each target. */
export async function connectProxy() {
  const targets: string[] = [];
  const srv = http.createServer((_req, res) => res.writeHead(405).end());
  srv.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    targets.push(req.url ?? '');
    const [host, port] = (req.url ?? '').split(':');
    const upstream = net.connect(Number(port), host ?? '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    targets,
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}
