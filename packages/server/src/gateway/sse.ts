import type { ServerResponse } from 'node:http';
import { DomainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { errorEvent } from './errors.js';
import { findUsage, type UsageReport } from './usage.js';
import type { LeaveSignal } from './client-left.js';

const USAGE_MARK_EMPTY = Buffer.from('"choices":[]');
const USAGE_MARK_NULL = Buffer.from('"choices":null');
/** The last event of a Responses API stream, which carries its usage (and is always relayed). */
const RESPONSE_DONE_MARK = Buffer.from('"type":"response.');
const RESPONSE_DONE = /"type":"response\.(completed|incomplete|failed)"/;
/** A chat delta's and a completion's text: what one streamed token arrives in. */
const CONTENT_MARKS = [Buffer.from('"content":"'), Buffer.from('"text":"')];
const QUOTE = 0x22;
const COMMA = 0x2c;
/** `usage: null`, which engines put on every chunk once asked for usage (as OpenAI does). */
const NULL_USAGE = Buffer.from('"usage":null');
const BLANK_LINE = Buffer.from('\n\n');
const EMPTY = Buffer.alloc(0);

/**
 * How a relayed stream ended — whole, cut off by the engine (or by the gateway: an event
 * over the cap, an idle engine), or left by the client — with the usage it carried and
 * the content events that reached the client.
 */
export interface StreamOutcome {
  end: 'done' | 'failed' | 'cancelled';
  usage: UsageReport;
  /** Events with non-empty content or text relayed: the token count when usage is missing. */
  relayed: number;
}

/** What the relay needs to know about the request whose stream it passes on. */
export interface StreamContext {
  /** Whether the client asked for the usage event (`stream_options.include_usage`). */
  clientWantsUsage: boolean;
  /** Aborted when the client left: then a failure is not reported in the stream. */
  signal: LeaveSignal;
  /** When the request arrived, for the time to first token. */
  t0: bigint;
}

export interface SseSettings {
  /** Interval of `: keep-alive` comments while no token has come. */
  keepAliveMs: number;
  /** Longest silence of the engine mid-stream before the stream ends with an error event. */
  streamIdleTimeoutMs: number;
  /** Largest single event (the bytes of an event not yet complete) the relay buffers. */
  maxEventBytes: number;
}

/** An engine's body: bytes as they come, and a way to stop reading it. */
export type EngineBody = AsyncIterable<Buffer> & { destroy(err?: Error): unknown };

/**
 * Passes an engine's SSE through as it arrives. Events are framed by blank lines; only
 * an event that carries usage (`"choices":[]` or `"choices":null`) is parsed, to count
 * tokens and, when the client did not ask for usage, to drop it again. The engine is
 * untrusted: a single event is capped, an engine silent past the idle timeout is cut
 * off, and nothing is written once the response has ended.
 */
export class SseRelay {
  constructor(
    private readonly metrics: Metrics,
    private readonly settings: SseSettings,
  ) {}

  /** @param onFirst called at the engine's first chunk (its prefill is over), for the balancer */
  async pipe(
    res: ServerResponse,
    body: EngineBody,
    headers: Record<string, string>,
    status: number,
    model: string,
    cx: StreamContext,
    onFirst?: () => void,
  ): Promise<StreamOutcome> {
    if (!res.headersSent) {
      res.writeHead(status, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.flushHeaders();
    }
    let first = true;
    const keepAlive = setInterval(() => {
      if (first) write(res, ': keep-alive\n\n');
    }, this.settings.keepAliveMs);
    // The engine's silence is measured only while the relay waits on it, not while a slow
    // client is taking what was written.
    let waitingOnClient = false;
    let failure: string | undefined;
    const idle = setTimeout(() => {
      if (waitingOnClient) return idle.refresh();
      failure = `the engine sent nothing for ${this.settings.streamIdleTimeoutMs / 1000}s (--stream-idle-timeout)`;
      body.destroy(new Error(failure));
    }, this.settings.streamIdleTimeoutMs);
    const send = async (data: Buffer | string) => {
      if (write(res, data)) return;
      waitingOnClient = true;
      await drained(res);
      waitingOnClient = false;
      idle.refresh();
    };
    // Bytes of an event not yet complete. Kept as bytes, not text, so a multi-byte
    // character split across two chunks is decoded whole; an event boundary ("\n\n")
    // never falls inside a UTF-8 sequence.
    let pending: Buffer = EMPTY;
    let usage: UsageReport;
    let relayed = 0;
    try {
      for await (const chunk of body) {
        idle.refresh();
        if (first) {
          first = false;
          this.metrics.observeTtft(model, Number(process.hrtime.bigint() - cx.t0) / 1e9);
          onFirst?.();
        }
        // The common case: whole events with no usage in them go out as the same bytes.
        if (
          pending.length === 0 &&
          endsWithBlankLine(chunk) &&
          chunk.indexOf(USAGE_MARK_EMPTY) === -1 &&
          chunk.indexOf(USAGE_MARK_NULL) === -1 &&
          !responseDone(chunk)
        ) {
          relayed += countContent(chunk);
          await send(cx.clientWantsUsage ? chunk : stripNullUsage(chunk));
          continue;
        }
        const buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        const end = buf.lastIndexOf(BLANK_LINE);
        pending = end === -1 ? buf : buf.subarray(end + 2);
        if (pending.length > this.settings.maxEventBytes) {
          failure = `the engine sent an event over ${this.settings.maxEventBytes} bytes`;
          body.destroy(new Error(failure));
          break;
        }
        if (end === -1) continue;
        const events = buf.subarray(0, end).toString('utf8').split('\n\n');
        let out = '';
        for (const ev of events) {
          if (ev.includes('"choices":[]') || ev.includes('"choices":null')) {
            const found = findUsage(dataOf(ev));
            if (found) usage = found;
            if (!cx.clientWantsUsage) continue;
          } else if (RESPONSE_DONE.test(ev)) {
            const found = findUsage(dataOf(ev));
            if (found) usage = found;
          }
          out += `${ev}\n\n`;
        }
        if (out) {
          const bytes = Buffer.from(out);
          relayed += countContent(bytes);
          await send(cx.clientWantsUsage ? bytes : stripNullUsage(bytes));
        }
      }
      if (failure === undefined) {
        if (pending.length) write(res, pending);
        end(res);
        return { end: 'done', usage, relayed };
      }
    } catch (err) {
      if (cx.signal.aborted) return { end: 'cancelled', usage, relayed };
      failure ??= `the engine failed mid-stream: ${(err as Error).message}`;
    } finally {
      clearInterval(keepAlive);
      clearTimeout(idle);
    }
    // Bytes already reached the client, so no retry: say so in the stream, as the SDKs expect.
    end(res, errorEvent(new DomainError('upstream_failed', failure)));
    return { end: 'failed', usage, relayed };
  }
}

/**
 * Writes unless the response has ended or its socket is gone: a write after the end
 * would emit an error no one listens for, which ends the process. Returns false when
 * the caller should wait for 'drain'.
 */
export function write(res: ServerResponse, data: Buffer | string): boolean {
  if (res.writableEnded || res.destroyed) return true;
  return res.write(data);
}

/** Ends the response with `data` unless it has ended or its socket is gone (see {@link write}). */
export function end(res: ServerResponse, data?: Buffer | string): void {
  if (res.writableEnded || res.destroyed) return;
  if (data === undefined) res.end();
  else res.end(data);
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
 * Content events in whole events: each `"content":"` or `"text":"` with a non-empty
 * string after it. Inside a JSON string these quotes would be escaped, so a match is
 * always a key.
 */
export function countContent(b: Buffer): number {
  let n = 0;
  for (const mark of CONTENT_MARKS) {
    for (let i = b.indexOf(mark); i !== -1; i = b.indexOf(mark, i + mark.length)) {
      if (b[i + mark.length] !== QUOTE) n++;
    }
  }
  return n;
}

/**
 * The events without their `"usage":null`: the gateway asks every stream for usage, so
 * engines put `usage: null` on each chunk, and a client that did not ask for usage gets
 * no `usage` field at all, as from OpenAI. The mark cannot be inside a JSON string (its
 * quotes would be escaped there), so this is a byte search, and the common chunk without
 * it is returned as it is.
 */
export function stripNullUsage(b: Buffer): Buffer {
  let i = b.indexOf(NULL_USAGE);
  if (i === -1) return b;
  const parts: Buffer[] = [];
  let from = 0;
  for (; i !== -1; i = b.indexOf(NULL_USAGE, from)) {
    // The comma that joined it to the object: before it (`,"usage":null`) or after it (`{"usage":null,`).
    if (b[i - 1] === COMMA) parts.push(b.subarray(from, i - 1));
    else {
      parts.push(b.subarray(from, i));
      if (b[i + NULL_USAGE.length] === COMMA) i++;
    }
    from = i + NULL_USAGE.length;
  }
  parts.push(b.subarray(from));
  return Buffer.concat(parts);
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

/** Whether whole events may hold a Responses API stream's last event (a cheap test first: most chunks have no `"type":"response.`). */
function responseDone(b: Buffer): boolean {
  return b.indexOf(RESPONSE_DONE_MARK) !== -1 && RESPONSE_DONE.test(b.toString('utf8'));
}

/** The JSON of an event: its `data:` line, after any `event:` line (the Responses API names its events). */
function dataOf(ev: string): string {
  const at = ev.startsWith('data:') ? 0 : ev.indexOf('\ndata:') + 1;
  return ev.slice(at).replace(/^data: ?/, '');
}

function endsWithBlankLine(b: Buffer): boolean {
  return b.length >= 2 && b[b.length - 1] === 10 && b[b.length - 2] === 10;
}
