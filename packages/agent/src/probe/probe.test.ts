import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { LOST_GPU_PROBLEM } from './nvidia-smi/index.js';
import { effectiveMemoryMb, mergeFabrics, probeMachine } from './probe.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const fx = (rel: string): string => path.join(FIXTURES, rel);
const NO_SMI = fx('nvidia-smi/not-installed');

describe('effectiveMemoryMb', () => {
  it('takes the cgroup limit only when it is lower', () => {
    expect(effectiveMemoryMb(8192, 4096)).toBe(4096);
    expect(effectiveMemoryMb(8192, 16384)).toBe(8192);
    expect(effectiveMemoryMb(8192, undefined)).toBe(8192);
  });

  it('stays unknown without MemTotal, whatever the cgroup says', () => {
    expect(effectiveMemoryMb(undefined, 4096)).toBeUndefined();
  });
});

describe('mergeFabrics', () => {
  it('dedupes, drops blanks and sorts', () => {
    expect(mergeFabrics(['roce'], ['nvlink'], ['ethernet', 'roce', ' ', ''])).toEqual(['ethernet', 'nvlink', 'roce']);
  });
});

describe('probeMachine against fixture roots', () => {
  it('an 8x H100 node with one GPU lost, InfiniBand and NVLink', async () => {
    const p = await probeMachine({
      nvidiaSmi: fx('nvidia-smi/h100-lost-one'),
      procRoot: fx('proc/h100'),
      sysRoot: fx('sys/ib'),
      extraFabrics: ['ethernet', 'infiniband'],
    });
    expect(p.memoryTotalMb).toBe(2063916);
    expect(p.cpuCores).toBe(os.availableParallelism());
    expect(p.cpuCores).toBeGreaterThan(0);
    expect(p.fabrics).toEqual(['ethernet', 'infiniband', 'nvlink']);
    expect(p.gpuError).toBeUndefined();
    expect(p.gpus).toHaveLength(8);
    expect(p.gpus.filter((g) => g.problems.includes(LOST_GPU_PROBLEM)).map((g) => g.bus_id)).toEqual(['00000000:5D:00.0']);
    expect(p.warnings).toHaveLength(1);
    expect(p.warnings[0]).toContain('exit 15');
  });

  it('a workstation with two 4090s and RoCE', async () => {
    const p = await probeMachine({
      nvidiaSmi: fx('nvidia-smi/rtx4090x2'),
      procRoot: fx('proc/cpu-32gb'),
      sysRoot: fx('sys/roce'),
      extraFabrics: [],
    });
    expect(p.memoryTotalMb).toBe(32768);
    expect(p.gpus.map((g) => g.class)).toEqual(['RTX-4090', 'RTX-4090']);
    expect(p.fabrics).toEqual(['roce']);
    expect(p.warnings).toEqual([]);
  });

  it('a broken driver is a node-level GPU error, memory still reported', async () => {
    const p = await probeMachine({
      nvidiaSmi: fx('nvidia-smi/driver-broken'),
      procRoot: fx('proc/cpu-8gb'),
      sysRoot: fx('sys/empty'),
      extraFabrics: [],
    });
    expect(p.gpuError).toBe('NVIDIA driver not loaded: nvidia-smi could not communicate with the driver (exit 9: driver not loaded)');
    expect(p.gpus).toEqual([]);
    expect(p.memoryTotalMb).toBe(8192);
    expect(p.fabrics).toEqual([]);
  });

  it('a CPU node capped by its cgroup reports the limit', async () => {
    const p = await probeMachine({
      nvidiaSmi: NO_SMI,
      procRoot: fx('proc/cgroup-capped'),
      sysRoot: fx('sys/cgroup-capped'),
      extraFabrics: [],
    });
    expect(p).toStrictEqual({ memoryTotalMb: 4096, cpuCores: os.availableParallelism(), gpus: [], fabrics: [], warnings: [] });
  });

  it('the 24 GB CPU fixture', async () => {
    const p = await probeMachine({ nvidiaSmi: NO_SMI, procRoot: fx('proc/cpu-24gb'), sysRoot: fx('sys/empty'), extraFabrics: [] });
    expect(p.memoryTotalMb).toBe(24576);
  });

  it('leaves memory out and warns when MemTotal is missing', async () => {
    const procRoot = fx('proc/no-memtotal');
    const p = await probeMachine({ nvidiaSmi: NO_SMI, procRoot, sysRoot: fx('sys/empty'), extraFabrics: [] });
    expect(p).not.toHaveProperty('memoryTotalMb');
    expect(p.gpuError).toBeUndefined();
    expect(p.warnings).toEqual([`could not read MemTotal from ${path.join(procRoot, 'meminfo')}; memory will be reported as unknown`]);
  });

  it('warns the same way when there is no meminfo at all', async () => {
    const procRoot = fx('proc/does-not-exist');
    const p = await probeMachine({ nvidiaSmi: NO_SMI, procRoot, sysRoot: fx('sys/empty'), extraFabrics: [] });
    expect(p.memoryTotalMb).toBeUndefined();
    expect(p.warnings).toEqual([`could not read MemTotal from ${path.join(procRoot, 'meminfo')}; memory will be reported as unknown`]);
  });
});
