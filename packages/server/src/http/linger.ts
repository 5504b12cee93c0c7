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
 * Called for every request as it arrives, before any handler; costs nothing for a
 * request whose body is read (or that has none).
 */
export function lingerOnEarlyAnswer(req: IncomingMessage, res: ServerResponse, limits: LingerLimits): void {
  if (req.complete) return;
  const socket = req.socket as Socket & { destroySoon(): void };
  // Already replaced for an earlier request on this connection that is still answering.
  if (Object.prototype.hasOwnProperty.call(socket, 'destroySoon')) return;
  // Node's server ends a connection it will not keep with `socket.destroySoon()` once the
  // answer is written: replaced (an own property over the prototype's) for this request
  // only, for the case where the body is still coming.
  const restore = () => void delete (socket as { destroySoon?: unknown }).destroySoon;
  socket.destroySoon = () => {
    restore();
    if (req.complete || socket.destroyed) return socket.destroySoon();
    linger(socket, req, limits);
  };
  res.once('close', () => {
    restore();
    // An answer sent with the body unread: the body is read on (and dropped) rather than
    // left in the socket, where a paused body would stall a kept-alive connection.
    if (!req.complete && !socket.destroyed) req.resume();
  });
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
