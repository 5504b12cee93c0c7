import { readFileSync } from 'node:fs';
import os from 'node:os';

/**
 * CPUs in a cgroup v2 `cpu.max` line (`QUOTA PERIOD`, or `max PERIOD` for none),
 * rounded up; undefined when unlimited or unreadable.
 */
export function parseCpuMax(text: string): number | undefined {
  const [quota, period] = text.trim().split(/\s+/);
  const q = Number(quota);
  const p = Number(period);
  if (quota === 'max' || !(q > 0) || !(p > 0)) return undefined;
  return Math.max(1, Math.ceil(q / p));
}

/**
 * Cores this process may really use: the machine's CPUs, narrowed by the affinity mask
 * (`os.availableParallelism`) and by a cgroup v2 CPU quota (containers, systemd
 * `CPUQuota=`), which neither of the others sees.
 */
export function availableCores(cgroupCpuMax = '/sys/fs/cgroup/cpu.max'): number {
  let quota: number | undefined;
  try {
    quota = parseCpuMax(readFileSync(cgroupCpuMax, 'utf8'));
  } catch {
    quota = undefined;
  }
  return Math.max(1, Math.min(os.cpus().length || 1, os.availableParallelism(), quota ?? Number.POSITIVE_INFINITY));
}

/** Weights per default thread; see {@link defaultThreads}. */
export const BYTES_PER_THREAD = 256 * 1024 * 1024;

/**
 * Threads for llama.cpp when --threads is not given: one per {@link BYTES_PER_THREAD} of
 * weights, at least 1, at most `cores`. llama.cpp's threads spin-wait at every op, so
 * for a small model the synchronisation costs more than the split saves, and every
 * thread beyond the free cores fights the Node thread that drives the generation.
 * Measured on a 2-core node with the 0.45 MB test model: 1 thread ≈ 1,200–1,500 tok/s,
 * 2 threads 17–83 tok/s; llama.cpp's own default (4 threads) ≈ 4 tok/s (cpu-engine.md §0).
 * A 4 GB model gets every core, where the arithmetic does pay for the threads.
 */
export function defaultThreads(weightsBytes: number, cores: number): number {
  return Math.max(1, Math.min(cores, Math.ceil(weightsBytes / BYTES_PER_THREAD)));
}
