import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'tsup';
import type { place, placeMany } from '../src/placement/index.js';

/**
 * Placement as it was at another git revision, built and imported next to this tree's,
 * so the bench can run both in one process: the same-run comparison that tells a change
 * from the machine's noise (timings of separate runs on a shared machine differ by more
 * than most changes).
 */

/** What the bench calls; every revision since placement has existed exports these. */
export interface PlacementApi {
  place: typeof place;
  placeMany: typeof placeMany;
}

/**
 * Builds `rev`'s placement sources (its `src/`, with this tree's installed packages, so
 * `@llmgw/shared` is this tree's) into `dist-bench/baseline/` and imports them. Returns
 * the reason instead when git or the revision is not available.
 */
export async function loadBaseline(rev: string): Promise<PlacementApi | string> {
  const dir = resolve('dist-bench', 'baseline');
  let tar: Buffer;
  try {
    const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
    tar = execFileSync('git', ['-C', root, 'archive', '--format=tar', rev, 'packages/server/src'], {
      maxBuffer: 256 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    return `no baseline (${rev}): ${(err as Error).message.split('\n')[0] ?? ''}`;
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  const src = join(dir, 'packages', 'server', 'src');
  // Placement was one file before it became a folder.
  const entry = existsSync(join(src, 'placement', 'index.ts')) ? join(src, 'placement', 'index.ts') : join(src, 'placement.ts');
  await build({ entry: { placement: entry }, outDir: join(dir, 'out'), format: ['esm'], target: 'node20', config: false, silent: true });
  return (await import(pathToFileURL(join(dir, 'out', 'placement.js')).href)) as PlacementApi;
}

/** Deterministic PRNG (mulberry32), so every run measures the same fleet. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Minimum and median of one side's samples, in ms of CPU time per call. */
export interface Side {
  min: number;
  median: number;
}

/**
 * Runs `a` and `b` alternately, `rounds` samples each (the order flips every round), each
 * sample `per` calls timed by `process.cpuUsage`. Between samples it allocates a random
 * amount of garbage, so young-generation collections fall at random points of each side's
 * calls rather than locking into a pattern that favours one of them.
 */
export function alternate(a: () => void, b: () => void, rounds: number, per: number): [Side, Side] {
  const sides: { run: () => void; times: number[] }[] = [
    { run: a, times: [] },
    { run: b, times: [] },
  ];
  const jitter = rng(7);
  let sink = 0;
  for (let w = 0; w < 5; w++) for (const s of sides) s.run();
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 === 0 ? sides : sides.slice().reverse()) {
      const junk: number[][] = [];
      for (let q = Math.floor(jitter() * 60_000); q > 0; q--) junk.push([q, q, q, q]);
      sink += junk.length;
      const t0 = process.cpuUsage();
      for (let k = 0; k < per; k++) s.run();
      const t = process.cpuUsage(t0);
      s.times.push((t.user + t.system) / 1000 / per);
    }
  }
  if (sink < 0) throw new Error('unreachable');
  return [summary(sides[0]?.times ?? []), summary(sides[1]?.times ?? [])];
}

function summary(xs: number[]): Side {
  const s = xs.slice().sort((x, y) => x - y);
  return { min: s[0] ?? NaN, median: s[Math.floor(s.length / 2)] ?? NaN };
}
