import type { ServerResponse } from 'node:http';
import { DomainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { errorEvent } from './errors.js';
import { findUsage, type TokenUsage } from './usage.js';

const USAGE_MARK_EMPTY = Buffer.from('"choices":[]');
const USAGE_MARK_NULL = Buffer.from('"choices":null');
const BLANK_LINE = Buffer.from('\n\n');
const EMPTY = Buffer.alloc(0);

/** How a relayed stream ended: whole, with the usage it carried, or cut off by the engine. */
export type StreamOutcome = { ok: true; usage: TokenUsage | undefined } | { ok: false };

/** What the relay needs to know about the request whose stream it passes on. */
export interface StreamContext {
  /** Whether the client asked for the usage event (`stream_options.include_usage`). */
  clientWantsUsage: boolean;
  /** Aborted when the client left: then a failure is not reported in the stream. */
  signal: AbortSignal;
  /** When the request arrived, for the time to first token. */
  t0: bigint;
}

/**
 * Passes an engine's SSE through as it arrives. Events are framed by blank lines; only
 * an event that carries usage (`"choices":[]` or `"choices":null`) is parsed, to count
 * tokens and, when the client did not ask for usage, to drop it again.
 */
export class SseRelay {
  constructor(
    private readonly metrics: Metrics,
    private readonly keepAliveMs: number,
  ) {}

  async pipe(res: ServerResponse, body: AsyncIterable<Buffer>, headers: Record<string, string>, status: number, model: string, cx: StreamContext): Promise<StreamOutcome> {
    if (!res.headersSent) {
      res.writeHead(status, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.flushHeaders();
    }
    let first = true;
    const keepAlive = setInterval(() => {
      if (first) res.write(': keep-alive\n\n');
    }, this.keepAliveMs);
    // Bytes of an event not yet complete. Kept as bytes, not text, so a multi-byte
    // character split across two chunks is decoded whole; an event boundary ("\n\n")
    // never falls inside a UTF-8 sequence.
    let pending: Buffer = EMPTY;
    let usage: TokenUsage | undefined;
    try {
      for await (const chunk of body) {
        if (first) {
          first = false;
          this.metrics.observeTtft(model, Number(process.hrtime.bigint() - cx.t0) / 1e9);
        }
        // The common case: whole events with no usage in them go out as the same bytes.
        if (pending.length === 0 && endsWithBlankLine(chunk) && chunk.indexOf(USAGE_MARK_EMPTY) === -1 && chunk.indexOf(USAGE_MARK_NULL) === -1) {
          if (!res.write(chunk)) await drained(res);
          continue;
        }
        const buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        const end = buf.lastIndexOf(BLANK_LINE);
        if (end === -1) {
          pending = buf;
          continue;
        }
        pending = buf.subarray(end + 2);
        const events = buf.subarray(0, end).toString('utf8').split('\n\n');
        let out = '';
        for (const ev of events) {
          if (ev.includes('"choices":[]') || ev.includes('"choices":null')) {
            const found = findUsage(ev.replace(/^data: ?/, ''));
            if (found) usage = found;
            if (!cx.clientWantsUsage) continue;
          }
          out += `${ev}\n\n`;
        }
        if (out && !res.write(out)) await drained(res);
      }
      if (pending.length) res.write(pending);
      res.end();
      return { ok: true, usage };
    } catch (err) {
      if (cx.signal.aborted) throw err;
      // Bytes already reached the client, so no retry: say so in the stream, as the SDKs expect.
      res.end(errorEvent(new DomainError('upstream_failed', `the engine failed mid-stream: ${(err as Error).message}`)));
      return { ok: false };
    } finally {
      clearInterval(keepAlive);
    }
  }
}

/**
 * An engine's whole reply as one SSE event, for a stream that already said 200 (a cold
 * start): the reply itself, or an error event keeping the engine's own error object
 * when it has one.
 */
export function replyAsEvent(text: string, status: number): string {
  if (status < 400) return `data: ${text}\n\n`;
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (parsed && typeof parsed === 'object' && parsed.error && typeof parsed.error === 'object') return `data: ${JSON.stringify({ error: parsed.error })}\n\n`;
  } catch {
    // not JSON: wrapped below
  }
  return errorEvent(new DomainError('upstream_failed', `the engine answered ${status}: ${text.slice(0, 200)}`));
}

/**
 * Waits until a slow client has taken what was written (or has gone). Reading from the
 * engine pauses meanwhile, so a slow client slows its own stream instead of making the
 * gateway buffer without limit.
 */
function drained(res: ServerResponse): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function endsWithBlankLine(b: Buffer): boolean {
  return b.length >= 2 && b[b.length - 1] === 10 && b[b.length - 2] === 10;
}
