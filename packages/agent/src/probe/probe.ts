import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { GpuReport } from '@llmgw/shared';
import { readCgroupLimitMb } from './cgroup.js';
import { readFabrics } from './fabrics.js';
import { parseMemTotalMb } from './meminfo.js';
import { queryGpus } from './nvidia-smi/index.js';

/** Options for {@link probeMachine}; the roots let tests point at fixture trees. */
export interface ProbeOptions {
  /** nvidia-smi to run: a path, or a bare name looked up on PATH. */
  nvidiaSmi: string;
  /** Normally `/proc`. */
  procRoot: string;
  /** Normally `/sys`. */
  sysRoot: string;
  /** Fabric names from agent config, reported in addition to the detected ones. */
  extraFabrics: string[];
  /** Limit for each nvidia-smi call; NVML can hang on a wedged GPU. */
  timeoutMs?: number;
}

/** What the agent knows about its machine, ready for the node report. */
export interface MachineProbe {
  /** min(MemTotal, cgroup limit). Absent when MemTotal could not be read. */
  memoryTotalMb?: number;
  cpuCores: number;
  gpus: GpuReport[];
  fabrics: string[];
  /** Node-level GPU problem (driver not loaded, version mismatch, hang). */
  gpuError?: string;
  warnings: string[];
}

/** Default nvidia-smi limit: long enough for a cold NVML init without persistence mode. */
export const DEFAULT_PROBE_TIMEOUT_MS = 15_000;

/** The node's memory capacity: the cgroup limit wins only when it is lower. */
export function effectiveMemoryMb(memTotalMb: number | undefined, cgroupLimitMb: number | undefined): number | undefined {
  if (memTotalMb === undefined) return undefined;
  return cgroupLimitMb !== undefined && cgroupLimitMb < memTotalMb ? cgroupLimitMb : memTotalMb;
}

/** Detected and configured fabrics, blank names dropped, deduplicated and sorted. */
export function mergeFabrics(...lists: ReadonlyArray<readonly string[]>): string[] {
  const names = lists
    .flat()
    .map((f) => f.trim())
    .filter((f) => f !== '');
  return [...new Set(names)].sort();
}

async function readMemTotalMb(file: string): Promise<number | undefined> {
  try {
    return parseMemTotalMb(await readFile(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Probes memory, CPUs, GPUs and fabrics. Never throws: what cannot be read is left
 * out of the result (with a warning or `gpuError`) rather than reported as zero.
 */
export async function probeMachine(opts: ProbeOptions): Promise<MachineProbe> {
  const meminfoPath = path.join(opts.procRoot, 'meminfo');
  const [memTotalMb, cgroupLimitMb, inventory, rdma] = await Promise.all([
    readMemTotalMb(meminfoPath),
    readCgroupLimitMb(opts.procRoot, opts.sysRoot),
    queryGpus(opts.nvidiaSmi, opts.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS),
    readFabrics(opts.sysRoot),
  ]);

  const warnings = [...inventory.warnings];
  if (memTotalMb === undefined) {
    warnings.push(`could not read MemTotal from ${meminfoPath}; memory will be reported as unknown`);
  }
  const probe: MachineProbe = {
    cpuCores: os.availableParallelism(),
    gpus: inventory.gpus,
    fabrics: mergeFabrics(rdma, inventory.nvlink ? ['nvlink'] : [], opts.extraFabrics),
    warnings,
  };
  const memoryTotalMb = effectiveMemoryMb(memTotalMb, cgroupLimitMb);
  if (memoryTotalMb !== undefined) probe.memoryTotalMb = memoryTotalMb;
  if (inventory.nodeError !== undefined) probe.gpuError = inventory.nodeError;
  return probe;
}
