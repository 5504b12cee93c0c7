import { describe, expect, it } from '@jest/globals';
import { GENERATIONS, MAX_REPLICA_BLOCKS, PrefixIndex, ReplicaCache, blocksFor, entryBound } from './prefix-index.js';
import { promptBlocks } from './prefix.js';

const prompt = (i: number, bytes = 2000) => promptBlocks({ prompt: `prompt ${i} `.padEnd(bytes, '.') });

describe('ReplicaCache', () => {
  it('matches the leading blocks it learned, and nothing of a prompt it never saw', () => {
    const c = new ReplicaCache(10_000);
    const a = promptBlocks({ prompt: 'shared system prompt. '.repeat(30) + 'question one' });
    const b = promptBlocks({ prompt: 'shared system prompt. '.repeat(30) + 'another question' });
    c.learn(a.hashes);
    expect(c.matched(a.hashes)).toBe(a.hashes.length);
    const shared = c.matched(b.hashes);
    expect(shared).toBeGreaterThan(5);
    expect(shared).toBeLessThan(b.hashes.length);
    expect(c.matched(prompt(1).hashes)).toBe(0);
  });

  it('forgets the least recently used prompts once over its capacity, and keeps those touched again', () => {
    const p = Array.from({ length: 40 }, (_, i) => prompt(i));
    const perPrompt = p[0]!.hashes.length;
    const c = new ReplicaCache(perPrompt * 20);
    for (let i = 0; i < 40; i++) {
      c.learn(p[i]!.hashes);
      c.learn(p[0]!.hashes); // prompt 0 stays hot
    }
    expect(c.matched(p[0]!.hashes)).toBe(perPrompt);
    expect(c.matched(p[39]!.hashes)).toBe(perPrompt);
    // The oldest are gone; at most the capacity is believed held.
    expect(c.matched(p[1]!.hashes)).toBe(0);
    const held = p.filter((x) => c.matched(x.hashes) > 0).length;
    expect(held * perPrompt).toBeLessThanOrEqual(c.capacityBlocks + perPrompt);
    expect(held).toBeGreaterThanOrEqual(20 - 20 / GENERATIONS);
  });

  it('counts a hot prompt once however often it is touched, so it does not push out the others', () => {
    const p = Array.from({ length: 4 }, (_, i) => prompt(i));
    const c = new ReplicaCache(p[0]!.hashes.length * 5);
    for (const x of p) c.learn(x.hashes);
    for (let i = 0; i < 1000; i++) c.learn(p[3]!.hashes);
    expect(c.entries).toBe(p[0]!.hashes.length * 4);
    for (const x of p) expect(c.matched(x.hashes)).toBe(x.hashes.length);
  });

  it('decays: forgets its oldest generation when the engine held less than predicted', () => {
    const p = Array.from({ length: 8 }, (_, i) => prompt(i));
    const c = new ReplicaCache(p[0]!.hashes.length * 16);
    for (const x of p) c.learn(x.hashes);
    expect(c.matched(p[0]!.hashes)).toBeGreaterThan(0);
    c.decay();
    expect(c.matched(p[0]!.hashes)).toBe(0);
    expect(c.matched(p[7]!.hashes)).toBeGreaterThan(0);
  });
});

describe('PrefixIndex', () => {
  it('forgets a replica that is not retained', () => {
    const ix = new PrefixIndex();
    ix.replica('m', 'r-1', 1000).learn(prompt(1).hashes);
    ix.replica('m', 'r-2', 1000).learn(prompt(1).hashes);
    ix.retain(new Set(['r-2']));
    expect(ix.peek('m', 'r-1')).toBeUndefined();
    expect(ix.peek('m', 'r-2')?.matched(prompt(1).hashes)).toBeGreaterThan(0);
  });

  it('stays within its documented bound after 100,000 distinct prompts', () => {
    const ix = new PrefixIndex();
    const capacity = blocksFor(500_000, 4);
    const replicas = ['r-1', 'r-2', 'r-3', 'r-4'];
    let max = 0;
    // Synthetic hashes of 2,000-byte prompts (32 blocks), distinct per prompt: the bound is the
    // index's, whatever the text (hashing is tested in prefix.test.ts).
    const hashes = new Int32Array(32);
    for (let i = 0; i < 100_000; i++) {
      for (let b = 0; b < 32; b++) hashes[b] = i * 32 + b;
      ix.replica('m', replicas[i % 4]!, capacity).learn(hashes);
      if (i % 1000 === 0) max = Math.max(max, ix.entries);
    }
    max = Math.max(max, ix.entries);
    // 100,000 prompts of 32 blocks each are 3.2 million blocks; the index keeps its capacity.
    expect(max).toBeLessThanOrEqual(replicas.length * entryBound(capacity));
    // At most one prompt past the capacity.
    expect(max).toBeLessThanOrEqual(replicas.length * (capacity + 32));
    expect(max).toBeGreaterThan(replicas.length * capacity * 0.7);
  });

  it('caps what an engine may claim', () => {
    const c = new ReplicaCache(Number.MAX_SAFE_INTEGER);
    expect(c.capacityBlocks).toBe(MAX_REPLICA_BLOCKS);
  });
});
