import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How much of a refused body is read and dropped after the answer, at most. */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;
/** How long a connection lingers after a refusal for the rest of its body, at most. */
export const LINGER_MAX_MS = 10_000;

export interface LingerLimits {
  maxBytes: number;
  maxMs: number;
}

/**
 * Lingering close, for an answer sent before the request's body was read (a 413 for a
 * body over the limit, a 401 before a body is worth reading). Closing a socket with
 * unread bytes in its receive buffer makes the kernel send a reset, and a client that
 * writes its whole body before reading (Node's http client, the SDKs) then gets
 * EPIPE/ECONNRESET and never sees the answer waiting in its own buffer. So when Node
 * would close such a connection (`Connection: close`, from either side), it only ends its
 * side (FIN after the answer) and keeps reading: the connection is destroyed once the
 * body has ended, the client closed, or `limits` (bytes after the answer, time) ran out.
 * A kept-alive connection reads the body on, as the next request needs it read anyway.
 *
 * Called for every request as it arrives, before any handler. A POST's body is not read
 * yet then, so this runs on nearly every client request: the socket gets its own
 * `destroySoon` once, for its whole life, and each request only sets and clears the
 * request it watches. Adding and deleting an own property per request (as this did)
 * turns the socket into a dictionary-mode object, and Node's own code slows on every
 * access to it (bench/gateway.bench.mjs).
 */
export function lingerOnEarlyAnswer(req: IncomingMessage, res: ServerResponse, limits: LingerLimits): void {
  if (req.complete) return;
  const socket = req.socket as LingerSocket;
  if (!(WATCHED in socket)) watch(socket);
  // An earlier request on this connection is still answering.
  if (socket[WATCHED]) return;
  socket[WATCHED] = { req, limits };
  res.once('close', () => {
    socket[WATCHED] = undefined;
    // An answer sent with the body unread: the body is read on (and dropped) rather than
    // left in the socket, where a paused body would stall a kept-alive connection.
    if (!req.complete && !socket.destroyed) req.resume();
  });
}

const WATCHED = Symbol('llmgw.lingerWatched');

type LingerSocket = Socket & { destroySoon(): void; [WATCHED]?: { req: IncomingMessage; limits: LingerLimits } | undefined };

/**
 * Node's server ends a connection it will not keep with `socket.destroySoon()` once the
 * answer is written: replaced (an own property over the prototype's, set once) so that a
 * request whose body is still coming lingers instead.
 */
function watch(socket: LingerSocket): void {
  socket[WATCHED] = undefined;
  const destroySoon = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    const w = socket[WATCHED];
    socket[WATCHED] = undefined;
    if (!w || w.req.complete || socket.destroyed) return destroySoon();
    linger(socket, w.req, w.limits);
  };
}

function linger(socket: Socket, req: IncomingMessage, limits: LingerLimits): void {
  socket.end();
  req.resume();
  const startBytes = socket.bytesRead;
  // Out of bounds: closed now, reset or not.
  const cut = () => {
    clearTimeout(timer);
    req.off('data', onData);
    socket.destroy();
  };
  // Nothing more to read: closed once the answer has left (destroying sooner would drop it).
  const done = () => {
    req.off('data', onData);
    if (socket.writableFinished) cut();
    else socket.once('finish', cut);
  };
  const timer = setTimeout(cut, limits.maxMs);
  timer.unref();
  const onData = () => {
    if (socket.bytesRead - startBytes > limits.maxBytes) cut();
  };
  // On the body's chunks, not the socket's: a listener on a socket the HTTP parser
  // consumes stops it reading.
  req.on('data', onData);
  req.once('end', done);
  socket.once('end', done);
  socket.once('close', () => clearTimeout(timer));
}
