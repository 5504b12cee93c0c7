import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The test engine's stand-in for a GPU engine's prefix cache (vLLM's automatic prefix
 * caching): a prompt's tokens cut into blocks of `blockTokens`, each block named by a
 * hash chained over every block before it (so a name stands for the whole prefix up to
 * there), kept in an LRU of `capacityTokens / blockTokens` blocks.
 *
 * As in vLLM: only full blocks are cached; a request's cached tokens are its leading
 * blocks found in the cache, stopping at the first miss; the last prompt token is always
 * computed (it gives the first output token), so a prompt is never wholly cached; and a
 * prompt's blocks are refreshed last block first, so eviction takes a prefix's tail
 * before its head and a shared system prompt outlives the questions behind it.
 */
export class PrefixCache {
  /** Block name → nothing; a Map iterates in insertion order, which makes it an LRU. */
  private readonly blocks = new Map<string, true>();
  private readonly maxBlocks: number;

  constructor(
    readonly capacityTokens: number,
    readonly blockTokens: number,
  ) {
    this.maxBlocks = Math.floor(capacityTokens / blockTokens);
  }

  /** Blocks held now. */
  get size(): number {
    return this.blocks.size;
  }

  /** The chained names of a prompt's full blocks, first block first. */
  blockNames(tokens: readonly string[]): string[] {
    const names: string[] = [];
    let previous = '';
    for (let end = this.blockTokens; end <= tokens.length; end += this.blockTokens) {
      // NUL cannot occur in a token (tokens are words, split on whitespace, or role-tagged words).
      previous = createHash('sha1')
        .update(previous)
        .update('\0')
        .update(tokens.slice(end - this.blockTokens, end).join('\0'))
        .digest('base64');
      names.push(previous);
    }
    return names;
  }

  /** Tokens of this prompt already cached, from its start; refreshes the blocks it finds. */
  lookup(names: readonly string[], promptTokens: number): number {
    // Leave the last token out of what can match: it is always computed.
    const usable = Math.min(names.length, Math.floor(Math.max(0, promptTokens - 1) / this.blockTokens));
    let hit = 0;
    while (hit < usable && this.blocks.has(names[hit]!)) hit++;
    this.touch(names.slice(0, hit));
    return hit * this.blockTokens;
  }

  /** The prompt's blocks were computed: cache them all, evicting the least recently used. */
  insert(names: readonly string[]): void {
    if (this.maxBlocks === 0) return;
    this.touch(names);
    for (const oldest of this.blocks.keys()) {
      if (this.blocks.size <= this.maxBlocks) break;
      this.blocks.delete(oldest);
    }
  }

  /** Moves blocks to the most recent end, the prefix's first block last (it is evicted last). */
  private touch(names: readonly string[]): void {
    for (let i = names.length - 1; i >= 0; i--) {
      const name = names[i]!;
      this.blocks.delete(name);
      this.blocks.set(name, true);
    }
  }
}

/**
 * One prefill at a time, first come first served, each taking its uncached tokens ÷
 * `tokensPerSecond`: so a request's time to first token is its wait in this queue plus
 * its own prefill, the model `--prefill-tokens-per-s` simulates. 0 tokens/s means instant
 * and no queue (the engine's behaviour without the flag).
 */
export class PrefillQueue {
  private tail: Promise<void> = Promise.resolve();

  /** `wait` is the prefill itself (a timer; tests pass their own to see the times asked for). */
  constructor(
    private readonly tokensPerSecond: number,
    private readonly wait: (ms: number, signal: AbortSignal) => Promise<unknown> = (ms, signal) => sleep(ms, undefined, { signal }),
  ) {}

  /**
   * Waits for this request's turn, then calls `start` (which looks the prompt up in the
   * cache and returns the tokens left to compute) and waits out their prefill; `done`
   * follows once they are computed. Resolves false if `signal` fired first: a client that
   * left mid-queue or mid-prefill frees the queue at once and caches nothing.
   */
  async run(signal: AbortSignal, start: () => number, done: () => void): Promise<boolean> {
    if (this.tokensPerSecond === 0) {
      start();
      done();
      return !signal.aborted;
    }
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise((resolve) => (release = resolve));
    let started = false;
    try {
      await abortable(previous, signal);
      started = true;
      const ms = (start() / this.tokensPerSecond) * 1000;
      if (ms > 0) await this.wait(ms, signal);
      done();
      return true;
    } catch {
      return false;
    } finally {
      // A request that left while queued still holds its place until the one before it ends.
      if (started) release();
      else void previous.then(release);
    }
  }
}

/** `promise`, or a rejection as soon as `signal` fires. */
function abortable(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    void promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
