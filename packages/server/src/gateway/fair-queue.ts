import { PRIORITIES, type Priority } from '@llmgw/shared';

/**
 * The queue discipline of flow control (DESIGN.md §16, README.md "Flow control"): what
 * waits in the gateway while every replica of a model is saturated, and in which order
 * it leaves. Pure: the clock is passed in, nothing here does I/O or sets a timer, so the
 * discipline is tested as functions (fair-queue.test.ts).
 *
 * - **bands**: strict priority, `interactive` before `standard` before `batch`; a lower
 *   band is served only when every higher one is empty.
 * - **deficit round robin** (Shreedhar and Varghese, 1995) within a band, across keys,
 *   weighted in tokens: each key with requests waiting has its own FIFO; at the start of
 *   its turn a key's deficit grows by a quantum of tokens and it sends while its head
 *   request costs no more than its deficit. A key sending ten times more waits ten times
 *   longer; it does not take the others' share.
 * - **bounded**: at most `maxPerBand` requests wait in each band (a request beyond is
 *   refused, `queue_full`), and each waits at most `ttlMs` (then `queue_timeout`).
 */

/** Priority bands, highest first (a key's `priority`). */
export const BANDS = PRIORITIES;
export type Band = Priority;

/** The band of a key that names none. */
export const DEFAULT_BAND: Band = 'standard';

/** Whether a string (a header, a stored key's field) names a band. */
export function isBand(v: unknown): v is Band {
  return typeof v === 'string' && (BANDS as readonly string[]).includes(v);
}

/** The lower of two bands: a request may lower its key's priority, never raise it. */
export function lowerOf(a: Band, b: Band): Band {
  return BANDS.indexOf(a) >= BANDS.indexOf(b) ? a : b;
}

/** Why a request did not leave the queue for a replica. */
export type QueueRefusal = 'queue_full' | 'queue_timeout';

export interface FairQueueSettings {
  /** Requests waiting per band before more are refused. */
  maxPerBand: number;
  /** Longest a request waits, ms. */
  ttlMs: number;
  /** Tokens added to a key's deficit at the start of each of its turns. */
  quantumTokens: number;
}

/**
 * 1,000 waiting requests per band per model; 30 s in the queue (llm-d's default TTL); a
 * quantum of 256 tokens (about 1 KiB of prompt), below a typical request's cost, so keys
 * alternate request by request; a smaller quantum costs no more, as empty rounds are skipped.
 */
export const DEFAULT_QUEUE_SETTINGS: FairQueueSettings = { maxPerBand: 1000, ttlMs: 30_000, quantumTokens: 256 };

/** One waiting request. */
export interface Waiting<T> {
  readonly item: T;
  readonly key: string;
  readonly band: Band;
  /** What it costs its key's deficit, in tokens (≥ 1). */
  readonly cost: number;
  readonly enqueuedMs: number;
  readonly deadlineMs: number;
}

interface KeyQueue<T> {
  key: string;
  entries: Waiting<T>[];
  deficit: number;
  /** Its turn has begun (its quantum is added), so it keeps sending while its head fits. */
  inTurn: boolean;
}

interface BandQueue<T> {
  /** Keys with requests waiting, in round-robin order; the head's turn is the current one. */
  active: KeyQueue<T>[];
  byKey: Map<string, KeyQueue<T>>;
  size: number;
  /** Sum of the waiting requests' costs. */
  tokens: number;
}

/**
 * The waiting requests of one model. `enqueue` adds (or refuses when the band is full),
 * `next` takes the request to dispatch, `remove` takes one out (its client left),
 * `expire` takes out those past their TTL. Every request put in comes out exactly once,
 * through one of `next`, `remove` or `expire`.
 */
export class FairQueue<T> {
  private readonly bands = new Map<Band, BandQueue<T>>(BANDS.map((b) => [b, { active: [], byKey: new Map(), size: 0, tokens: 0 }]));
  /** Every waiting request in arrival order: with one TTL for all, also deadline order. */
  private readonly order = new Set<Waiting<T>>();

  constructor(readonly settings: FairQueueSettings = DEFAULT_QUEUE_SETTINGS) {}

  /** Requests waiting, in one band or in all. */
  size(band?: Band): number {
    return band ? this.bands.get(band)!.size : this.order.size;
  }

  /** Tokens waiting in a band and every band above it: what a request of that band has ahead of it at most. */
  tokensAhead(band: Band): number {
    let t = 0;
    for (const b of BANDS) {
      t += this.bands.get(b)!.tokens;
      if (b === band) break;
    }
    return t;
  }

  /** The earliest deadline of a waiting request, for the caller's one timer. */
  nextDeadline(): number | undefined {
    for (const w of this.order) return w.deadlineMs;
    return undefined;
  }

  enqueue(item: T, key: string, band: Band, cost: number, nowMs: number): { ok: true; waiting: Waiting<T> } | { ok: false; reason: 'queue_full' } {
    const bq = this.bands.get(band)!;
    if (bq.size >= this.settings.maxPerBand) return { ok: false, reason: 'queue_full' };
    const w: Waiting<T> = { item, key, band, cost: Math.max(1, Math.ceil(cost)), enqueuedMs: nowMs, deadlineMs: nowMs + this.settings.ttlMs };
    let kq = bq.byKey.get(key);
    if (!kq) {
      kq = { key, entries: [], deficit: 0, inTurn: false };
      bq.byKey.set(key, kq);
      // A key that starts waiting joins at the end of the round, with no credit saved.
      bq.active.push(kq);
    }
    kq.entries.push(w);
    bq.size++;
    bq.tokens += w.cost;
    this.order.add(w);
    return { ok: true, waiting: w };
  }

  /** The next request to dispatch: the highest band's, by deficit round robin; undefined when none waits. */
  next(): Waiting<T> | undefined {
    for (const band of BANDS) {
      const bq = this.bands.get(band)!;
      if (bq.size > 0) return this.take(bq);
    }
    return undefined;
  }

  /** Takes out a waiting request (its client left); false when it is not waiting any more. */
  remove(w: Waiting<T>): boolean {
    if (!this.order.has(w)) return false;
    const bq = this.bands.get(w.band)!;
    const kq = bq.byKey.get(w.key)!;
    kq.entries.splice(kq.entries.indexOf(w), 1);
    this.taken(bq, kq, w);
    return true;
  }

  /** Takes out every request whose deadline has passed, oldest first. */
  expire(nowMs: number): Waiting<T>[] {
    const out: Waiting<T>[] = [];
    for (const w of this.order) {
      if (w.deadlineMs > nowMs) break;
      out.push(w);
    }
    for (const w of out) this.remove(w);
    return out;
  }

  private take(bq: BandQueue<T>): Waiting<T> {
    let rotations = 0;
    for (;;) {
      const kq = bq.active[0]!;
      if (!kq.inTurn) {
        kq.deficit += this.settings.quantumTokens;
        kq.inTurn = true;
      }
      const head = kq.entries[0]!;
      if (head.cost <= kq.deficit) {
        kq.deficit -= head.cost;
        kq.entries.shift();
        this.taken(bq, kq, head);
        return head;
      }
      // Its turn is over: to the end of the round.
      kq.inTurn = false;
      bq.active.push(bq.active.shift()!);
      if (++rotations >= bq.active.length) {
        // A whole round and nobody could send (requests larger than the quantum): skip
        // the rounds that would pass the same way, so a 100,000-token prompt costs one
        // step, not a hundred.
        const q = this.settings.quantumTokens;
        let rounds = Infinity;
        for (const k of bq.active) rounds = Math.min(rounds, Math.ceil((k.entries[0]!.cost - k.deficit) / q));
        if (rounds > 1) for (const k of bq.active) k.deficit += (rounds - 1) * q;
        rotations = 0;
      }
    }
  }

  /** Bookkeeping once `w` has left `kq`'s FIFO. */
  private taken(bq: BandQueue<T>, kq: KeyQueue<T>, w: Waiting<T>): void {
    bq.size--;
    bq.tokens -= w.cost;
    this.order.delete(w);
    if (kq.entries.length === 0) {
      // Standard DRR: an emptied queue leaves the round and keeps no credit.
      bq.byKey.delete(kq.key);
      bq.active.splice(bq.active.indexOf(kq), 1);
    }
  }
}
