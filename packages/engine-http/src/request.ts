import type { IncomingMessage, ServerResponse } from 'node:http';
import { SseStream } from './sse.js';

/**
 * One request as a backend sees it: what the client sent, whether it is still there,
 * and the two ways to answer (a JSON body or an event stream).
 */
export class EngineRequest {
  private readonly abort = new AbortController();
  private abortedTime: number | null = null;
  /** Extra words for the request's log line. */
  note = '';

  constructor(
    readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {}

  /** Fires when the client goes away before the response is complete: stop its work then. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** performance.now() when the client went away; null while it is there. */
  get abortedAt(): number | null {
    return this.abortedTime;
  }

  /** Called by the server when the connection closed before the response finished. */
  clientLeft(): void {
    this.abortedTime = performance.now();
    this.abort.abort(new Error('client disconnected'));
  }

  /** Answers with a JSON body; a no-op once an answer has begun or the socket is gone. */
  json(status: number, body: unknown): void {
    if (this.res.destroyed || this.res.headersSent) return;
    const text = JSON.stringify(body);
    this.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    this.res.end(text);
  }

  /** Answers with plain text (Prometheus metrics). */
  text(status: number, contentType: string, body: string): void {
    if (this.res.destroyed || this.res.headersSent) return;
    this.res.writeHead(status, { 'content-type': contentType });
    this.res.end(body);
  }

  /** Answers with server-sent events. */
  sse(): SseStream {
    return new SseStream(this.res, this.signal, () => {
      this.note = 'client stopped reading';
    });
  }

  /** Drops the connection without an answer, as a crashing engine would. */
  drop(): void {
    this.req.socket.destroy();
  }

  setHeader(name: string, value: string): void {
    this.res.setHeader(name, value);
  }

  /** The answer has begun (headers sent) or can no longer be given. */
  get answered(): boolean {
    return this.res.headersSent || this.res.destroyed;
  }

  /** Cuts an answer off midway (an error after the stream began). */
  destroy(): void {
    this.res.destroy();
  }
}
