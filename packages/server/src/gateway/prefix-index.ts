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
 * {@link entryBound} of 294,912 entries at ~36 bytes (V8 sets of 31-bit integers), at
 * most ~10 MiB per replica.
 */
export const MAX_REPLICA_BLOCKS = 262_144;
/**
 * The LRU is approximated by generations: new and touched blocks go into the youngest
 * set; when it is over a quarter of the capacity a new set starts, and the oldest of
 * four is dropped whole. A lookup is at most four set probes and a touch one insert,
 * where an exact LRU on a JS Map costs a delete and an insert per block (and V8's map
 * iteration degrades as deletes pile up at its head). Four keeps what is forgotten
 * early to at most a quarter of the capacity; more generations cost more probes.
 */
export const GENERATIONS = 4;

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

  constructor(capacityBlocks: number) {
    this.perGeneration = perGeneration(capacityBlocks);
  }

  /** Re-sizes the replica (its engine said its capacity); the next rotations apply it. */
  setCapacity(blocks: number): void {
    this.perGeneration = perGeneration(blocks);
  }

  get capacityBlocks(): number {
    return this.perGeneration * GENERATIONS;
  }

  /** Entries held, duplicates across generations included: what the memory bound counts. */
  get entries(): number {
    let n = 0;
    for (const g of this.gens) n += g.size;
    return n;
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
    for (let i = 0; i < hashes.length; i++) young.add(hashes[i]!);
    // After the prompt, never in the middle of it, so that a prompt stays in one generation.
    if (young.size >= this.perGeneration) {
      this.gens.unshift(new Set());
      if (this.gens.length > GENERATIONS) this.gens.pop();
    }
  }

  /**
   * The engine held less than predicted: it evicted what the index still believes it
   * holds, so the index forgets its oldest generation (or all it has, when that is one).
   */
  decay(): void {
    if (this.gens.length > 1) this.gens.pop();
    else this.gens = [new Set()];
  }

  private holds(h: number): boolean {
    for (const g of this.gens) if (g.has(h)) return true;
    return false;
  }
}

function perGeneration(capacityBlocks: number): number {
  return Math.max(1, Math.floor(Math.min(capacityBlocks, MAX_REPLICA_BLOCKS) / GENERATIONS));
}

/**
 * The most entries one replica holds: four generations, each closed once over its share
 * of the capacity by at most one prompt's blocks.
 */
export function entryBound(capacityBlocks: number): number {
  return GENERATIONS * (perGeneration(capacityBlocks) + MAX_BLOCKS);
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
