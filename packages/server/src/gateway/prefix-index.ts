import { BLOCK_BYTES, MAX_BLOCKS } from './prefix.js';

/**
 * Capacity assumed for a replica whose engine does not say (no
 * `x-llmgw-prefix-cache-tokens` header): 500,000 tokens, llm-d's default of 31,250
 * entries per server at 16-token blocks. `--prefix-cache-tokens` sets it.
 */
export const DEFAULT_PREFIX_CACHE_TOKENS = 500_000;
/**
 * The most blocks remembered per replica, whatever its engine claims: 262,144 blocks of
 * 16 tokens are 4,194,304 tokens (llm-d's in-flight token scale); with the
 * {@link entryBound} of 270,336 entries at ~36 bytes (V8 sets of 31-bit integers), at
 * most ~9.3 MiB per replica.
 */
export const MAX_REPLICA_BLOCKS = 262_144;
/**
 * The LRU is approximated by generations: new and touched blocks move into the youngest
 * set, which closes once it holds a quarter of the capacity (so four generations span
 * it); whenever the replica holds more than its capacity, the oldest generation is
 * dropped whole. What is forgotten early is thus at most a quarter of the capacity. A
 * touch is a move (one probe per older set until found) and a lookup a probe per set,
 * where an exact LRU on a JS Map costs a delete and an insert per block and V8's map
 * iteration degrades as deletes pile up at its head.
 */
export const GENERATIONS = 4;
/**
 * Generations kept at most, whatever their size: touches empty old generations, and
 * each one costs a probe per lookup. 16 keeps a lookup's probes few; empty ones are
 * dropped anyway.
 */
export const MAX_GENERATIONS = 16;

/**
 * What one replica is believed to hold in its prefix cache: the block hashes routed to
 * it recently, up to its capacity. Blocks of one prompt are always learned together and
 * into one generation, and a prompt touches its prefix whenever it touches a block, so
 * the set of a prompt's blocks held is always a prefix (blocks 0..k-1): the match is a
 * binary search, O(log n) probes.
 */
export class ReplicaCache {
  /** Newest first. */
  private gens: Set<number>[] = [new Set()];
  private perGeneration: number;
  /** Blocks held, over all generations (each block is in one). */
  private size = 0;
  private capacity: number;

  constructor(capacityBlocks: number) {
    this.capacity = capped(capacityBlocks);
    this.perGeneration = perGeneration(this.capacity);
  }

  /** Re-sizes the replica (its engine said its capacity); the next prompt learned applies it. */
  setCapacity(blocks: number): void {
    this.capacity = capped(blocks);
    this.perGeneration = perGeneration(this.capacity);
  }

  get capacityBlocks(): number {
    return this.capacity;
  }

  /** Entries held (each block in one generation): what the memory bound counts. */
  get entries(): number {
    return this.size;
  }

  /** How many leading blocks of the prompt the replica is believed to hold. */
  matched(hashes: Int32Array): number {
    let lo = 0;
    let hi = hashes.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.holds(hashes[mid - 1]!)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The replica now has the prompt (it was routed there): every block is touched. */
  learn(hashes: Int32Array): void {
    const young = this.gens[0]!;
    // A prompt is learned whole, and only into the youngest generation, which loses
    // nothing until it stops being the youngest: when its last block is there, so is
    // every block before it, and learning it again would change nothing. The common
    // case (a repeated system prompt) then costs one lookup, not one per block.
    const last = hashes[hashes.length - 1];
    if (last === undefined || young.has(last)) return;
    // For the same reason the blocks the youngest generation holds are a prefix of the
    // prompt: a binary search finds where the new ones start (a repeated system prompt
    // with a question of its own: one or two new blocks, not hundreds of lookups).
    let lo = 0;
    let hi = hashes.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (young.has(hashes[mid]!)) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < hashes.length; i++) {
      const h = hashes[i]!;
      if (young.has(h)) continue;
      // Moved, not copied: each block is in one generation, so the capacity counts
      // distinct blocks, as the engine's does.
      let moved = false;
      for (let g = 1; g < this.gens.length && !moved; g++) moved = this.gens[g]!.delete(h);
      if (!moved) this.size++;
      young.add(h);
    }
    // After the prompt, never in the middle of it, so that a prompt stays in one generation.
    if (young.size >= this.perGeneration) this.gens = [new Set(), ...this.gens.filter((g) => g.size > 0)];
    while (this.gens.length > 1 && (this.size > this.capacityBlocks || this.gens.length > MAX_GENERATIONS)) this.size -= this.gens.pop()!.size;
  }

  /**
   * The engine held less than predicted: it evicted what the index still believes it
   * holds, so the index forgets its oldest generation (or all it has, when that is one).
   */
  decay(): void {
    if (this.gens.length > 1) this.size -= this.gens.pop()!.size;
    else [this.gens, this.size] = [[new Set()], 0];
  }

  private holds(h: number): boolean {
    for (const g of this.gens) if (g.has(h)) return true;
    return false;
  }
}

function capped(blocks: number): number {
  return Math.max(GENERATIONS, Math.min(Math.ceil(blocks), MAX_REPLICA_BLOCKS));
}

function perGeneration(capacity: number): number {
  return Math.floor(capacity / GENERATIONS);
}

/**
 * The most entries one replica holds: its capacity, passed by at most one prompt's
 * blocks (a generation is dropped only after the prompt that overfilled it).
 */
export function entryBound(capacityBlocks: number): number {
  return capped(capacityBlocks) + MAX_BLOCKS;
}

/** A capacity in tokens as blocks of routing text, at the model's bytes per token. */
export function blocksFor(tokens: number, bytesPerToken: number): number {
  return Math.ceil((tokens * bytesPerToken) / BLOCK_BYTES);
}

/**
 * The prefix index of every model: per model, per replica, what it is believed to hold.
 * Replicas are forgotten when they leave the routes (`retain`).
 */
export class PrefixIndex {
  private readonly models = new Map<string, Map<string, ReplicaCache>>();

  /** The replica's cache, created empty with `capacityBlocks` when new. */
  replica(model: string, replicaId: string, capacityBlocks: number): ReplicaCache {
    let m = this.models.get(model);
    if (!m) this.models.set(model, (m = new Map<string, ReplicaCache>()));
    let r = m.get(replicaId);
    if (!r) m.set(replicaId, (r = new ReplicaCache(capacityBlocks)));
    return r;
  }

  /** The replica's cache when it has one. */
  peek(model: string, replicaId: string): ReplicaCache | undefined {
    return this.models.get(model)?.get(replicaId);
  }

  /** Forgets replicas not in `live` (gone, failed, draining: their caches go with them). */
  retain(live: ReadonlySet<string>): void {
    for (const [model, m] of this.models) {
      for (const id of m.keys()) if (!live.has(id)) m.delete(id);
      if (m.size === 0) this.models.delete(model);
    }
  }

  /** Entries over all replicas, for the memory bound's test and docs. */
  get entries(): number {
    let n = 0;
    for (const m of this.models.values()) for (const r of m.values()) n += r.entries;
    return n;
  }
}
