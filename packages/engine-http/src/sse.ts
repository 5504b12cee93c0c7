import type { ServerResponse } from 'node:http';

/** A streaming client this far behind is treated as gone rather than buffered for without end. */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * Server-sent events, one write per event so each token reaches the client at once.
 * Headers go out with the first event (or {@link open}), so an error found before any
 * text (a prompt too long for the context) can still be a plain JSON error.
 */
export class SseStream {
  constructor(
    private readonly res: ServerResponse,
    private readonly signal: AbortSignal,
    /** Called when the client stopped reading and is cut off. */
    private readonly onOverflow: () => void,
  ) {}

  /** Sends the headers now; false once the client is gone. */
  open(): boolean {
    if (this.signal.aborted || this.res.destroyed) return false;
    if (!this.res.headersSent) {
      this.res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      this.res.flushHeaders();
    }
    return true;
  }

  /**
   * Writes one event; false once the client is gone. A producer that cannot pause (tokens
   * from a synchronous callback) just sends; a reader that stops reading altogether is
   * cut off at {@link MAX_BUFFERED_BYTES} instead of buffered for.
   */
  send(payload: unknown): boolean {
    if (!this.open()) return false;
    this.res.write(`data: ${JSON.stringify(payload)}\n\n`);
    if (this.res.writableLength > MAX_BUFFERED_BYTES) {
      this.onOverflow();
      this.res.destroy();
      return false;
    }
    return true;
  }

  /** Writes `text` as it is, framing and all (the test engine's fault mode); false once the client is gone. */
  sendRaw(text: string): boolean {
    if (!this.open()) return false;
    this.res.write(text);
    return true;
  }

  /**
   * For a producer that can pause: resolves once the socket has taken what was written
   * (backpressure), or at once if it already has; false if the client left meanwhile.
   * 'close' also ends the wait, so a vanished client cannot hang the producer.
   */
  async drained(): Promise<boolean> {
    if (this.res.writableNeedDrain && !this.res.destroyed) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.res.off('drain', done);
          this.res.off('close', done);
          resolve();
        };
        this.res.once('drain', done);
        this.res.once('close', done);
      });
    }
    return !this.signal.aborted;
  }

  /** The `[DONE]` sentinel, and the end of the response. */
  end(): void {
    if (this.open()) this.res.end('data: [DONE]\n\n');
  }
}
