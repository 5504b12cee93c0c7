import pg from 'pg';
import type { Logger } from 'pino';
import { CHANNEL, type Topic } from './postgres.js';

export interface NotificationsOptions {
  log?: Logger;
  /** The first wait before reconnecting; doubled on each failure up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /**
   * How often the connection is checked with a query. A connection cut without a word
   * (a network partition, a failover) would otherwise look alive and deliver nothing.
   */
  pingMs?: number;
}

type Callback = () => void | Promise<void>;

/**
 * The NOTIFYs of the other instances, on one dedicated connection that LISTENs on
 * `llmgw` (outside the pool: a pooled connection would not keep its LISTEN). When the
 * connection drops it reconnects with backoff, logging the outage once and its end once;
 * a NOTIFY sent while it was gone is lost, so after a reconnect every callback is called
 * once, and the instance reloads everything it holds.
 */
export class Notifications {
  private readonly callbacks = new Map<string, Set<Callback>>();
  private client?: pg.Client;
  private closed = false;
  private reconnecting = false;
  private pingTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private wake?: () => void;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly pingMs: number;

  private constructor(
    private readonly url: string,
    private readonly opts: NotificationsOptions,
  ) {
    this.backoffMs = opts.backoffMs ?? 100;
    this.maxBackoffMs = opts.maxBackoffMs ?? 5_000;
    this.pingMs = opts.pingMs ?? 5_000;
  }

  /** Connects and LISTENs; rejects when the first connection fails (the store's open has just reached the database). */
  static async listen(url: string, opts: NotificationsOptions = {}): Promise<Notifications> {
    const n = new Notifications(url, opts);
    await n.connect();
    return n;
  }

  /** Calls `cb` on each NOTIFY of `topic`, and once after every reconnect. Returns a function that removes it. */
  on(topic: Topic, cb: Callback): () => void {
    let set = this.callbacks.get(topic);
    if (!set) this.callbacks.set(topic, (set = new Set()));
    set.add(cb);
    return () => void set.delete(cb);
  }

  /** Whether the LISTEN connection is up now. */
  get connected(): boolean {
    return this.client !== undefined && !this.reconnecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.url,
      keepAlive: true,
      application_name: 'llmgw-server listen',
      connectionTimeoutMillis: 10_000,
      query_timeout: this.pingMs,
    });
    // Until the connection is set up, a failure rejects connect(); afterwards it starts a reconnect.
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (msg) => {
      if (msg.channel === CHANNEL && msg.payload) this.deliver(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      client.on('error', () => {});
      await client.end().catch(() => {});
      throw err;
    }
    this.client = client;
    this.pingTimer = setInterval(() => {
      client.query('SELECT 1').catch(() => this.lost(client));
    }, this.pingMs);
    this.pingTimer.unref();
  }

  private deliver(topic: string): void {
    for (const cb of this.callbacks.get(topic) ?? []) this.call(topic, cb);
  }

  private call(topic: string, cb: Callback): void {
    try {
      Promise.resolve(cb()).catch((err: unknown) => this.opts.log?.warn({ err: String(err), topic }, 'reload after a NOTIFY failed'));
    } catch (err) {
      this.opts.log?.warn({ err: String(err), topic }, 'reload after a NOTIFY failed');
    }
  }

  /** The connection in use is gone (error, end, or a ping that failed): reconnect, once. */
  private lost(client: pg.Client): void {
    if (this.closed || this.client !== client || this.reconnecting) return;
    this.reconnecting = true;
    clearInterval(this.pingTimer);
    client.removeAllListeners('end');
    client.on('error', () => {});
    client.end().catch(() => {});
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const since = Date.now();
    this.opts.log?.warn('lost the LISTEN connection to PostgreSQL: changes made by other instances are not seen until it is back; reconnecting');
    let wait = this.backoffMs;
    for (;;) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.retryTimer = setTimeout(resolve, wait);
      });
      if (this.closed) return;
      try {
        await this.connect();
        break;
      } catch {
        wait = Math.min(wait * 2, this.maxBackoffMs);
      }
    }
    if (this.closed) {
      clearInterval(this.pingTimer);
      await this.client?.end().catch(() => {});
      return;
    }
    this.reconnecting = false;
    this.opts.log?.info({ downMs: Date.now() - since }, 'LISTEN connection to PostgreSQL back: reloading everything');
    // What was notified while the connection was down is lost: reload every kind.
    for (const [topic, set] of this.callbacks) for (const cb of set) this.call(topic, cb);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.pingTimer);
    clearTimeout(this.retryTimer);
    this.wake?.();
    const c = this.client;
    this.client = undefined;
    if (c) {
      c.removeAllListeners('end');
      c.on('error', () => {});
      await c.end().catch(() => {});
    }
  }
}
