import { EventEmitter } from 'node:events';
import { redactUrls } from '@llmgw/shared';
import type { EventList, EventSource, EventType, EventView } from '@llmgw/shared';
import type { Logger } from 'pino';
import { serialWrites } from '../store/serial.js';
import type { EventRetention, Store } from '../store/store.js';

/** What a caller records; the log gives it its id and time. */
export interface NewEvent {
  type: EventType;
  source: EventSource;
  reason: string;
  object: string;
  nodes?: string[];
  model?: string;
  who?: string;
  message: string;
}

/** Which events a reader wants: of one node, of one model, after a cursor, at most `limit`. */
export interface EventQuery {
  node?: string;
  model?: string;
  since?: number;
  limit?: number;
}

export interface EventLogOptions {
  log: Logger;
  /** How long an event is kept (default 7 days). */
  retentionMs?: number;
  /** How many events are kept at most (default 10,000). */
  maxRows?: number;
  now?: () => number;
}

export const EVENT_RETENTION_MS = 7 * 24 * 3600 * 1000;
export const EVENT_MAX_ROWS = 10_000;
/** What a list answers when the reader names no limit. */
export const DEFAULT_EVENT_LIMIT = 500;

/**
 * The fleet's events, newest last: every one is written through to the store (pruned
 * there to the same bounds on each write) and kept in memory, where reads and watches
 * are served, so a watcher wakes on a record without polling the database. Like other
 * background state, an event the store refuses (a full disk) stays in memory and is
 * written with the next one; recording never throws.
 *
 * On PostgreSQL several instances record events, so the database gives the ids: an
 * event enters memory only as read back from the store (`sync`, after each write and on
 * every instance's NOTIFY), and every instance lists the same events with the same ids.
 */
export class EventLog {
  private readonly events: EventView[];
  private readonly pending: EventView[] = [];
  private readonly emitter = new EventEmitter();
  private nextId: number;
  /** A read of other instances' events is asked for; one asked during a read runs after it. */
  private syncAsked = false;
  /** Ids come from the store (PostgreSQL), not from this log. */
  private readonly shared: boolean;
  private readonly now: () => number;
  private readonly retentionMs: number;
  private readonly maxRows: number;

  constructor(
    private readonly store: Store,
    private readonly opts: EventLogOptions,
    loaded: EventView[] = [],
  ) {
    this.now = opts.now ?? Date.now;
    this.retentionMs = opts.retentionMs ?? EVENT_RETENTION_MS;
    this.maxRows = opts.maxRows ?? EVENT_MAX_ROWS;
    this.shared = store.kind === 'postgres';
    this.emitter.setMaxListeners(0);
    this.events = loaded;
    this.nextId = (loaded.at(-1)?.id ?? 0) + 1;
    this.prune();
  }

  /** The events the store kept; a store that cannot be read starts the log empty, with a warning. */
  static async load(store: Store, opts: EventLogOptions): Promise<EventLog> {
    let loaded: EventView[] = [];
    try {
      loaded = await store.loadEvents(opts.maxRows ?? EVENT_MAX_ROWS);
    } catch (err) {
      opts.log.warn({ err: (err as Error).message }, 'events from before this start could not be read; new ones are still recorded');
    }
    return new EventLog(store, opts, loaded);
  }

  /**
   * Reads the events other instances wrote since the newest one here (PostgreSQL). One
   * read at a time; a call while one runs (a NOTIFY for a commit it may have missed)
   * reads again after it.
   */
  async sync(): Promise<void> {
    this.syncAsked = true;
    await this.readNew();
  }

  private readonly readNew = serialWrites(
    () => this.syncAsked,
    async () => {
      this.syncAsked = false;
      let fresh: EventView[];
      try {
        fresh = await this.store.loadEvents(this.maxRows, this.events.at(-1)?.id ?? 0);
      } catch {
        return false; // The store counts its failures; the next write or NOTIFY reads again.
      }
      const added = fresh.filter((e) => e.id > (this.events.at(-1)?.id ?? 0));
      if (!added.length) return true;
      this.events.push(...added);
      this.prune();
      this.emitter.emit('event');
      return true;
    },
  );

  /**
   * Records an event, wakes watchers, and writes it (and any the store refused before).
   * On PostgreSQL the id is 0 here: the event is listed once the store gave it its id.
   */
  record(e: NewEvent): EventView {
    const view: EventView = {
      id: this.shared ? 0 : this.nextId++,
      time: new Date(this.now()).toISOString(),
      type: e.type,
      source: e.source,
      reason: e.reason,
      object: e.object,
      nodes: e.nodes ?? [],
      ...(e.model !== undefined ? { model: e.model } : {}),
      ...(e.who !== undefined ? { who: e.who } : {}),
      // Events are shown to viewers and kept: no credential of a source URL in them.
      message: redactUrls(e.message),
    };
    this.pending.push(view);
    if (!this.shared) {
      this.events.push(view);
      this.emitter.emit('event');
    }
    this.prune();
    void this.flush();
    return view;
  }

  /**
   * The events matching `q`, oldest first, and the cursor to ask after: without `since`
   * the newest `limit` of them; after `since` the oldest `limit`, so that asking again
   * with the cursor goes on where this answer stopped.
   */
  list(q: EventQuery = {}): EventList {
    const last = this.events.at(-1)?.id ?? 0;
    // A cursor past the newest id is from before the store was replaced: start over.
    const since = q.since !== undefined && q.since <= last ? q.since : 0;
    const matching = this.events.filter((e) => e.id > since && matches(e, q));
    const limit = q.limit ?? DEFAULT_EVENT_LIMIT;
    // After a cursor (a watch), the oldest `limit` and a cursor at the last one given: the
    // newest `limit` with the cursor at the end would skip the rest of a burst for good.
    if (q.since !== undefined && matching.length > limit) return { events: matching.slice(0, limit), cursor: matching[limit - 1]!.id };
    return { events: matching.slice(-limit), cursor: last };
  }

  /**
   * Like `list`, but when nothing matches after `q.since` it waits up to `timeoutMs` for
   * an event that does (a watch's long-poll), or until `signal` aborts.
   */
  wait(q: EventQuery, timeoutMs: number, signal?: AbortSignal): Promise<EventList> {
    const first = this.list(q);
    if (first.events.length || timeoutMs <= 0 || signal?.aborted) return Promise.resolve(first);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.emitter.off('event', onEvent);
        signal?.removeEventListener('abort', done);
        resolve(this.list(q));
      };
      const onEvent = () => {
        if (this.list(q).events.length) done();
      };
      const timer = setTimeout(done, timeoutMs);
      this.emitter.on('event', onEvent);
      signal?.addEventListener('abort', done);
    });
  }

  private retention(): EventRetention {
    return { sinceMs: this.now() - this.retentionMs, maxRows: this.maxRows };
  }

  private prune(): void {
    const { sinceMs, maxRows } = this.retention();
    let drop = Math.max(0, this.events.length - maxRows);
    while (drop < this.events.length && Date.parse(this.events[drop]!.time) < sinceMs) drop++;
    if (drop) this.events.splice(0, drop);
    if (this.pending.length > maxRows) this.pending.splice(0, this.pending.length - maxRows);
  }

  /** Writes what is pending; one write at a time, so no event is sent twice. Never rejects. */
  readonly flush = serialWrites(
    () => this.pending.length > 0,
    async () => {
      const batch = this.pending.splice(0, this.pending.length);
      try {
        await this.store.addEvents(batch, this.retention());
      } catch (err) {
        this.pending.unshift(...batch);
        this.prune();
        this.opts.log.debug({ events: this.pending.length, err: (err as Error).message }, 'events kept in memory until the store takes writes again');
        return false;
      }
      if (this.shared) await this.sync();
      return true;
    },
  );
}

function matches(e: EventView, q: EventQuery): boolean {
  return (q.node === undefined || e.nodes.includes(q.node)) && (q.model === undefined || e.model === q.model);
}
