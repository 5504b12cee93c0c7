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
 * - **sparse keys first** (FQ-CoDel's new-flow list, RFC 8290 §4.1): a key that starts
 *   waiting is *new* and is served before the keys already taking turns, its head request
 *   at once, the tokens it lacks borrowed from its next turns (its deficit goes below
 *   zero). So a quiet key's request leaves at the next dispatch instead of after a turn
 *   of every backlogged key: with prefills of tens of ms that turn is the whole of its
 *   added latency (bench/fairness.bench.mjs). A new key then takes its turns with the
 *   others; once emptied it stays in the round, with its debt, until its turn comes
 *   round, so a key cannot stay new by sending one request at a time.
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
  /** In `fresh`: it started waiting and has not sent yet. */
  fresh: boolean;
}

interface BandQueue<T> {
  /** Keys that started waiting and have not sent yet, in arrival order: served first, one request each. */
  fresh: KeyQueue<T>[];
  /**
   * Keys taking turns, in round-robin order; the head's turn is the current one. A key
   * here may have no request waiting (emptied after its fresh request): it leaves when
   * its turn comes.
   */
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
  private readonly bands = new Map<Band, BandQueue<T>>(BANDS.map((b) => [b, { fresh: [], active: [], byKey: new Map(), size: 0, tokens: 0 }]));
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
      kq = { key, entries: [], deficit: 0, inTurn: false, fresh: true };
      bq.byKey.set(key, kq);
      // A key that starts waiting is served first, with no credit saved.
      bq.fresh.push(kq);
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
    const fresh = bq.fresh.shift();
    if (fresh) {
      // Its turn, of one request: a quantum now, the rest borrowed and paid back from its
      // next turns before it sends again; what a small request leaves of the quantum is
      // not kept (DRR's bound between keys holds with the fresh turn counted as one).
      const head = fresh.entries.shift()!;
      fresh.fresh = false;
      fresh.deficit = Math.min(0, this.settings.quantumTokens - head.cost);
      bq.active.push(fresh);
      this.taken(bq, fresh, head);
      return head;
    }
    let rotations = 0;
    for (;;) {
      const kq = bq.active[0]!;
      if (kq.entries.length === 0) {
        // Emptied after its fresh request, its turn come round: it leaves the round, and its debt with it.
        bq.active.shift();
        bq.byKey.delete(kq.key);
        continue;
      }
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
        for (const k of bq.active) if (k.entries.length) rounds = Math.min(rounds, Math.ceil((k.entries[0]!.cost - k.deficit) / q));
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
    if (kq.entries.length === 0 && (kq.fresh || kq.deficit >= 0)) {
      // Standard DRR: an emptied queue leaves the round and keeps no credit. One in debt
      // (emptied by its fresh request) stays until its turn comes round: coming back at
      // once, it would be fresh again and skip its debt.
      bq.byKey.delete(kq.key);
      const list = kq.fresh ? bq.fresh : bq.active;
      list.splice(list.indexOf(kq), 1);
    }
    if (bq.size === 0 && bq.active.length > 0) {
      // Nothing waits in the band: the round is over, and what keys owed with it.
      bq.active.length = 0;
      bq.byKey.clear();
    }
  }
}
