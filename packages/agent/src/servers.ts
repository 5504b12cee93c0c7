import { HTTPError, RequestError } from 'got';
import type { Logger } from 'pino';
import { ServerRotation, instanceDown, splitServerList, withFailover } from '@llmgw/shared';

/** Whether a failed request means "that instance is not there or not well" (`instanceDown`), for got's errors. */
export function isDown(err: unknown): boolean {
  if (err instanceof HTTPError) return instanceDown({ status: err.response.statusCode });
  return err instanceof RequestError && instanceDown({ code: err.code });
}

/** A request cut because the pool left its address (another request found that instance gone). */
class LeftBehind extends Error {
  constructor(
    readonly url: string,
    readonly original: unknown,
  ) {
    super(`left ${url}: ${(original as Error).message}`);
  }
}

/** The failure in a word, for the line that says the agent moved: `ECONNREFUSED`, `503`. */
function why(err: unknown): string {
  if (err instanceof LeftBehind) return why(err.original);
  if (err instanceof HTTPError) return String(err.response.statusCode);
  return err instanceof RequestError ? err.code : (err as Error).message;
}

/**
 * The server addresses the agent was given (`--server a,b`), shared by everything that
 * calls the server — heartbeats, the long-poll, the join, `llmgw://` model files — so
 * that when one caller finds an instance gone, the others use the next one too. Every
 * request the agent makes is safe to repeat on another instance (heartbeats and polls
 * carry the whole state; a join with the same node id is idempotent on the server), so
 * each fails over on any `isDown` failure. The same CA pin and node credential hold for
 * every instance: they share both.
 */
export class ServerPool {
  readonly rotation: ServerRotation;
  /** A move was logged and nothing has succeeded since: during a whole outage, one line, not one per try. */
  private said = false;
  /** Per address, what aborts the requests still out to it once the pool leaves it. */
  private readonly leaving = new Map<string, AbortController>();

  constructor(
    urls: readonly string[],
    private readonly log?: Logger,
  ) {
    this.rotation = new ServerRotation(urls);
  }

  /** A pool from `--server`'s value (one address or a comma-separated list), or the pool itself. */
  static of(server: string | ServerPool, log?: Logger): ServerPool {
    return typeof server === 'string' ? new ServerPool(splitServerList(server), log) : server;
  }

  /** The address in use now. */
  get current(): string {
    return this.rotation.current;
  }

  /** Every address, as one would write them to `--server`: for lines about all of them. */
  get label(): string {
    return this.rotation.urls.join(', ');
  }

  /**
   * One request, against the current address and then, while instances are down, the
   * others (each once). The attempt's `signal` fires on `stop`, and when another request
   * finds the instance gone and the pool leaves it: a long-poll held by an instance that
   * froze (no reset comes from a stopped process or a lost host) then moves on at once,
   * not at its 35 s timeout.
   */
  async request<T>(attempt: (base: string, signal: AbortSignal) => Promise<T>, stop?: AbortSignal): Promise<T> {
    const run = async (url: string): Promise<T> => {
      let left = this.leaving.get(url);
      if (!left) this.leaving.set(url, (left = new AbortController()));
      // Linked by hand, and unlinked after: AbortSignal.any on long-lived signals keeps every request's signal alive.
      const mine = new AbortController();
      const abort = () => mine.abort();
      left.signal.addEventListener('abort', abort);
      stop?.addEventListener('abort', abort);
      if (stop?.aborted) mine.abort();
      try {
        return await attempt(url, mine.signal);
      } catch (err) {
        throw left.signal.aborted && !stop?.aborted ? new LeftBehind(url, err) : err;
      } finally {
        left.signal.removeEventListener('abort', abort);
        stop?.removeEventListener('abort', abort);
      }
    };
    try {
      const v = await withFailover(
        this.rotation,
        run,
        (err) => err instanceof LeftBehind || isDown(err),
        (from, to, err) => this.moved(from, to, err),
      );
      this.said = false;
      return v;
    } catch (err) {
      throw err instanceof LeftBehind ? err.original : err;
    }
  }

  /**
   * For a caller with its own retry loop (a model file's resumable transfer): the address
   * to use after `base` failed with `err`, or undefined when that failure is not a reason
   * to move (or there is nowhere to move to).
   */
  after(base: string, err: unknown): string | undefined {
    if (!isDown(err)) return undefined;
    const before = this.current;
    const to = this.rotation.next(base);
    if (to !== undefined && this.current !== before) this.moved(base, to, err);
    return to === base ? undefined : to;
  }

  private moved(from: string, to: string, err: unknown): void {
    this.leaving.get(from)?.abort();
    this.leaving.delete(from);
    const code = why(err);
    const line = err instanceof HTTPError ? `server ${from} answered ${code}; using ${to}` : `server ${from} unreachable (${code}); using ${to}`;
    if (this.said) this.log?.debug({ from, to, code }, line);
    else this.log?.info({ from, to, code }, line);
    this.said = true;
  }
}
