import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'tsup';
import type { place, placeMany } from '../src/placement/index.js';

/**
 * Placement at a git revision and in this tree, each built the same way into its own
 * file, so the bench can run them side by side: the same-run comparison that tells a
 * change from the machine's noise (timings of separate runs on a shared machine differ
 * by more than most changes). Built alike on purpose: code bundled into the bench file
 * and code imported from a file of its own were measured 1.2–2x apart on Node 20 with
 * the same source, from how V8 tiers them.
 */

/** What the bench calls; every revision since placement has existed exports these. */
export interface PlacementApi {
  place: typeof place;
  placeMany: typeof placeMany;
}

/**
 * Builds placement's sources into `dist-bench/<name>/placement.js` and returns that
 * file: this tree's `src/` for `rev` `tree`, else `rev`'s `src/` out of git (with this
 * tree's installed packages, so `@llmgw/shared` is this tree's). Returns the reason
 * instead, as `{ error }`, when git or the revision is not available.
 */
export async function buildSide(rev: string, name: string): Promise<{ file: string } | { error: string }> {
  const dir = resolve('dist-bench', name);
  let src = resolve('src');
  if (rev !== 'tree') {
    let tar: Buffer;
    try {
      const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
      tar = execFileSync('git', ['-C', root, 'archive', '--format=tar', rev, 'packages/server/src'], {
        maxBuffer: 256 * 1024 * 1024,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (err) {
      return { error: `no baseline (${rev}): ${(err as Error).message.split('\n')[0] ?? ''}` };
    }
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['-x', '-C', dir], { input: tar });
    src = join(dir, 'packages', 'server', 'src');
  }
  // Placement was one file before it became a folder.
  const entry = existsSync(join(src, 'placement', 'index.ts')) ? join(src, 'placement', 'index.ts') : join(src, 'placement.ts');
  const out = join(dir, 'out');
  await build({ entry: { placement: entry }, outDir: out, format: ['esm'], target: 'node20', config: false, silent: true });
  return { file: join(out, 'placement.js') };
}

/** Imports a file `buildSide` built. */
export async function importSide(file: string): Promise<PlacementApi> {
  return (await import(pathToFileURL(file).href)) as PlacementApi;
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

/** Minimum and median of some samples, in ms of CPU time per call. */
export interface Side {
  min: number;
  median: number;
}

/** `fn`'s CPU time per call, `samples` times (`process.cpuUsage`: this process, all threads). */
export function cpuSamples(fn: () => void, samples: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = process.cpuUsage();
    fn();
    const t = process.cpuUsage(t0);
    out.push((t.user + t.system) / 1000);
  }
  return out;
}

export function minMedian(xs: readonly number[]): Side {
  const s = xs.slice().sort((x, y) => x - y);
  return { min: s[0] ?? NaN, median: s[Math.floor(s.length / 2)] ?? NaN };
}
