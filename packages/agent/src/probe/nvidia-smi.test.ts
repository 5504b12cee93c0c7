import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import {
  GPU_QUERY_FIELDS,
  GPU_QUERY_FIELDS_MINIMAL,
  LOST_GPU_PROBLEM,
  describeExit,
  gpuClass,
  gpuQueryArgs,
  isUnknownValue,
  normaliseBusId,
  parseGpuQuery,
  parseLostGpuLine,
  parseTopoNvlink,
} from './nvidia-smi/index.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const captured = (name: string): string => readFileSync(`${FIXTURES}captured/${name}`, 'utf8');

/** The 16-column query that reference fixtures A–C were written for. */
const REFERENCE_FIELDS = [
  'index',
  'uuid',
  'name',
  'pci.bus_id',
  'memory.total',
  'memory.used',
  'memory.free',
  'utilization.gpu',
  'temperature.gpu',
  'power.draw',
  'power.limit',
  'compute_mode',
  'driver_version',
  'ecc.errors.uncorrected.volatile.total',
  'retired_pages.pending',
  'clocks_event_reasons.active',
];

const H100_UUIDS = [
  'GPU-1f0c6a52-8d3e-4b7a-9c21-3e5f7a0b9c11',
  'GPU-2a1d7b63-9e4f-4c8b-8d32-4f6a8b1cad22',
  'GPU-3b2e8c74-af50-4d9c-9e43-507b9c2dbe33',
  'GPU-4c3f9d85-b061-4ead-af54-618cad3ecf44',
  'GPU-5d40ae96-c172-4fbe-b065-729dbe4fd055',
  'GPU-6e51bfa7-d283-4acf-8176-83aecf50e166',
  'GPU-7f62c0b8-e394-4bd0-9287-94bfd061f277',
  'GPU-8073d1c9-f4a5-4ce1-a398-a5c0e172f388',
];

/** A 9-column row in GPU_QUERY_FIELDS order. */
const row = (health: [string, string, string], index = 0): string =>
  [index, `GPU-${index}`, 'NVIDIA A100-SXM4-80GB', '00000000:07:00.0', 81920, 100, ...health].join(', ');

describe('query arguments', () => {
  it('asks for the documented fields in CSV without header or units', () => {
    expect(gpuQueryArgs(GPU_QUERY_FIELDS)).toEqual([
      '--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.failure',
      '--format=csv,noheader,nounits',
    ]);
    expect(GPU_QUERY_FIELDS_MINIMAL).toEqual(GPU_QUERY_FIELDS.slice(0, 6));
  });
});

describe('parseGpuQuery on reference fixtures', () => {
  it('A: 8x H100 busy, exit 0', () => {
    const r = parseGpuQuery(captured('nvidia-smi-a-h100x8.txt'), '', 0, REFERENCE_FIELDS);
    expect(r.nodeError).toBeUndefined();
    expect(r.warnings).toEqual([]);
    expect(r.gpus.map((g) => g.uuid)).toEqual(H100_UUIDS);
    expect(r.gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(r.gpus[0]).toStrictEqual({
      index: 0,
      uuid: H100_UUIDS[0],
      bus_id: '00000000:18:00.0',
      name: 'NVIDIA H100 80GB HBM3',
      class: 'H100-80GB',
      memory_total_mb: 81559,
      memory_used_mb: 74421,
      problems: [],
    });
    expect(r.gpus.map((g) => g.memory_used_mb)).toEqual([74421, 74421, 74421, 74421, 0, 0, 0, 0]);
    expect(r.gpus.every((g) => g.problems.length === 0 && g.class === 'H100-80GB')).toBe(true);
  });

  it('B: GPU 3 fell off the bus, exit 15: the other 7 rows are kept', () => {
    const r = parseGpuQuery(captured('nvidia-smi-b-h100-lost-one.txt'), '', 15, REFERENCE_FIELDS);
    expect(r.nodeError).toBeUndefined();
    expect(r.gpus).toHaveLength(8);
    expect(r.gpus[3]).toStrictEqual({
      index: 3,
      bus_id: '00000000:5D:00.0',
      name: 'unknown',
      class: 'unknown',
      problems: [LOST_GPU_PROBLEM],
    });
    expect(r.gpus.filter((g) => g.problems.length === 0).map((g) => g.uuid)).toEqual(H100_UUIDS.filter((_, i) => i !== 3));
    expect(r.warnings).toEqual([
      'nvidia-smi exited with a failure (exit 15: GPU has fallen off the bus or is otherwise inaccessible); accepted the 7 GPU rows it printed',
    ]);
  });

  it('B: the lost line on stderr still lands on the missing index', () => {
    const b = captured('nvidia-smi-b-h100-lost-one.txt').split('\n');
    const lostLine = b.find((l) => l.startsWith('Unable'))!;
    const rows = b.filter((l) => l !== lostLine).join('\n');
    const r = parseGpuQuery(rows, `${lostLine}\n`, 15, REFERENCE_FIELDS);
    expect(r.gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(r.gpus[3]!.uuid).toBeUndefined();
    expect(r.gpus[3]!.bus_id).toBe('00000000:5D:00.0');
  });

  it('B variant: a re-indexed listing does not give two GPUs the same index', () => {
    const stdout = [
      row(['0', '[N/A]', 'No'], 0),
      'Unable to determine the device handle for GPU 0000:4f:00.0: GPU is lost. Reboot the system to recover this GPU',
      row(['0', '[N/A]', 'No'], 1).replace('GPU-1', 'GPU-x'),
    ].join('\n');
    const r = parseGpuQuery(stdout, '', 15);
    expect(r.gpus.map((g) => [g.index, g.bus_id, g.problems.length])).toEqual([
      [0, '00000000:07:00.0', 0],
      [1, '00000000:07:00.0', 0],
      [2, '00000000:4F:00.0', 1],
    ]);
  });

  it('C: 2x RTX 4090 with [N/A] health columns is healthy', () => {
    const r = parseGpuQuery(captured('nvidia-smi-c-rtx4090x2.txt'), '', 0, REFERENCE_FIELDS);
    expect(r.nodeError).toBeUndefined();
    expect(r.gpus.map((g) => [g.index, g.class, g.memory_total_mb, g.memory_used_mb, g.problems])).toEqual([
      [0, 'RTX-4090', 24564, 1, []],
      [1, 'RTX-4090', 24564, 1, []],
    ]);
    expect(r.gpus[1]!.uuid).toBe('GPU-c3a94d12-5e8b-4f67-b2d9-0e1f6a4b7c02');
    expect(r.gpus[1]!.bus_id).toBe('00000000:41:00.0');
  });

  it('D: driver not loaded, exit 9', () => {
    const r = parseGpuQuery(captured('nvidia-smi-d-driver-not-loaded.txt'), '', 9, REFERENCE_FIELDS);
    expect(r).toStrictEqual({
      gpus: [],
      nodeError: 'NVIDIA driver not loaded: nvidia-smi could not communicate with the driver (exit 9: driver not loaded)',
      warnings: [],
    });
  });

  it('D: driver/library version mismatch, on either stream', () => {
    const text = captured('nvidia-smi-d-version-mismatch.txt');
    const expected = 'NVIDIA driver/library version mismatch: the driver was upgraded without a reboot (exit 18)';
    expect(parseGpuQuery(text, '', 18).nodeError).toBe(expected);
    expect(parseGpuQuery('', text, 18).nodeError).toBe(expected);
  });
});

describe('parseGpuQuery edge cases', () => {
  it('No devices were found', () => {
    expect(parseGpuQuery('No devices were found\n', '', 6).nodeError).toBe('nvidia-smi found no GPUs: No devices were found (exit 6: object not found)');
  });

  it('other NVML init failures', () => {
    expect(parseGpuQuery('Failed to initialize NVML: Unknown Error\n', '', 255).nodeError).toBe(
      'NVML failed to initialise: Unknown Error (exit 255: other error)',
    );
  });

  it('a non-zero exit with no rows and unknown text', () => {
    expect(parseGpuQuery('', 'Segmentation fault\n', 139).nodeError).toBe('nvidia-smi failed (exit 139): Segmentation fault');
    expect(parseGpuQuery('', '', 4).nodeError).toBe('nvidia-smi failed (exit 4: no permission) with no output');
  });

  it('exit 0 with no rows is still a node error', () => {
    expect(parseGpuQuery('\n', '', 0).nodeError).toBe('nvidia-smi listed no GPUs');
  });

  it('an invalid field answer', () => {
    const r = parseGpuQuery('Field "remapped_rows.failure" is not a valid field to query.\n', '', 2);
    expect(r.nodeError).toBe('nvidia-smi rejected the query fields (exit 2: invalid argument)');
  });

  it('rc 14 with a full table: rows accepted, infoROM warning kept', () => {
    const stdout = `${captured('nvidia-smi-a-h100x8.txt')}WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n`;
    const r = parseGpuQuery(stdout, '', 14, REFERENCE_FIELDS);
    expect(r.nodeError).toBeUndefined();
    expect(r.gpus).toHaveLength(8);
    expect(r.gpus.every((g) => g.problems.length === 0)).toBe(true);
    expect(r.warnings).toEqual([
      'nvidia-smi exited with a failure (exit 14: infoROM corrupted); accepted the 8 GPU rows it printed',
      'WARNING: infoROM is corrupted at gpu 0000:0B:00.0',
    ]);
  });

  it('health columns become problems', () => {
    expect(parseGpuQuery(row(['3', '[N/A]', 'No']), '', 0).gpus[0]!.problems).toEqual(['3 uncorrectable ECC errors']);
    expect(parseGpuQuery(row(['1', 'No', 'No']), '', 0).gpus[0]!.problems).toEqual(['1 uncorrectable ECC error']);
    expect(parseGpuQuery(row(['0', 'Yes', 'No']), '', 0).gpus[0]!.problems).toEqual(['retired pages pending']);
    expect(parseGpuQuery(row(['0', '[N/A]', 'Yes']), '', 0).gpus[0]!.problems).toEqual(['row remapping failed']);
    expect(parseGpuQuery(row(['2', 'Yes', 'Yes']), '', 0).gpus[0]!.problems).toEqual([
      '2 uncorrectable ECC errors',
      'retired pages pending',
      'row remapping failed',
    ]);
    expect(parseGpuQuery(row(['0', 'No', 'No']), '', 0).gpus[0]!.problems).toEqual([]);
  });

  it('sentinels are unknown, never numbers', () => {
    const line = '0, GPU-a, NVIDIA L40S, 00000000:01:00.0, [Insufficient Permissions], [N/A], [Unknown Error], N/A, [Not Supported]';
    const gpu = parseGpuQuery(line, '', 0).gpus[0]!;
    expect(gpu).not.toHaveProperty('memory_total_mb');
    expect(gpu).not.toHaveProperty('memory_used_mb');
    expect(gpu.problems).toEqual([]);
    expect(gpu.class).toBe('L40S');
  });

  it('keeps the first of two rows with the same UUID', () => {
    const r = parseGpuQuery(`${row(['0', 'No', 'No'], 0)}\n${row(['5', 'No', 'No'], 0)}\n`, '', 0);
    expect(r.gpus).toHaveLength(1);
    expect(r.gpus[0]!.problems).toEqual([]);
    expect(r.warnings).toEqual(['nvidia-smi listed GPU GPU-0 twice; kept the first row']);
  });

  it('parses the minimal field list', () => {
    const r = parseGpuQuery('0, GPU-t4, Tesla T4, 00000000:00:04.0, 15360, 0\n', '', 0, GPU_QUERY_FIELDS_MINIMAL);
    expect(r.gpus).toStrictEqual([
      { index: 0, uuid: 'GPU-t4', bus_id: '00000000:00:04.0', name: 'Tesla T4', class: 'T4', memory_total_mb: 15360, memory_used_mb: 0, problems: [] },
    ]);
  });
});

describe('gpuClass', () => {
  it.each([
    ['NVIDIA H100 80GB HBM3', undefined, 'H100-80GB'],
    ['NVIDIA H100 80GB HBM3', 81559, 'H100-80GB'],
    ['NVIDIA GeForce RTX 4090', 24564, 'RTX-4090'],
    ['NVIDIA A100-SXM4-40GB', 40960, 'A100-40GB'],
    ['NVIDIA A100 80GB PCIe', 81920, 'A100-80GB'],
    ['NVIDIA A100-SXM4-80GB', undefined, 'A100-80GB'],
    ['NVIDIA L40S', 46068, 'L40S'],
    ['NVIDIA H200', 143771, 'H200-141GB'],
    ['NVIDIA H200', undefined, 'H200'],
    ['NVIDIA H100 NVL', 95830, 'H100-94GB'],
    ['NVIDIA H100 PCIe', 81559, 'H100-80GB'],
    ['Tesla T4', 15360, 'T4'],
    ['Tesla V100-SXM2-16GB', 16160, 'V100-16GB'],
    ['NVIDIA RTX A6000', 49140, 'RTX-A6000'],
    ['NVIDIA GeForce RTX 3090 Ti', 24564, 'RTX-3090-Ti'],
    ['NVIDIA RTX 6000 Ada Generation', 49140, 'RTX-6000-Ada'],
    ['Quadro RTX 8000', 48601, 'RTX-8000'],
    ['NVIDIA A10G', 23028, 'A10G'],
    ['NVIDIA L4', 23034, 'L4'],
    ['unknown', undefined, 'unknown'],
    ['[N/A]', undefined, 'unknown'],
  ])('%s (%s MiB) → %s', (name, memory, expected) => {
    expect(gpuClass(name, memory)).toBe(expected);
  });
});

describe('small helpers', () => {
  it('isUnknownValue', () => {
    expect(['[N/A]', 'N/A', '[Not Supported]', '[Unknown Error]', ''].every(isUnknownValue)).toBe(true);
    expect(['0', 'No', 'NVIDIA L4'].some(isUnknownValue)).toBe(false);
  });

  it('normaliseBusId pads the domain and upper-cases', () => {
    expect(normaliseBusId('0000:4f:00.0')).toBe('00000000:4F:00.0');
    expect(normaliseBusId('00000000:18:00.0')).toBe('00000000:18:00.0');
  });

  it('parseLostGpuLine', () => {
    expect(parseLostGpuLine('Unable to determine the device handle for GPU 0000:4F:00.0: Unknown Error')).toEqual({
      busId: '00000000:4F:00.0',
    });
    expect(parseLostGpuLine('Unable to determine the device handle for GPU0000:4F:00.0: GPU is lost.')).toEqual({
      busId: '00000000:4F:00.0',
    });
    expect(parseLostGpuLine('GPU is lost. Reboot the system to recover this GPU')).toEqual({});
    expect(parseLostGpuLine('WARNING: infoROM is corrupted at gpu 0000:0B:00.0')).toBeUndefined();
  });

  it('describeExit', () => {
    expect(describeExit(9)).toBe('exit 9: driver not loaded');
    expect(describeExit(42)).toBe('exit 42');
  });
});

describe('parseTopoNvlink', () => {
  it('E: 8x H100 with NV18 between every pair', () => {
    expect(parseTopoNvlink(captured('topo-e-h100x8-nvlink.txt'))).toBe(true);
  });

  it('F: 2x RTX 4090 over PCIe only, even though the legend mentions NV#', () => {
    const f = captured('topo-f-rtx4090x2-pcie.txt');
    expect(f).toContain('NV#');
    expect(parseTopoNvlink(f)).toBe(false);
  });

  it('one NVLinked pair among PCIe pairs', () => {
    const text = '\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tNV4\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\t0-7\nGPU2\tSYS\tSYS\t X \t0-7\n';
    expect(parseTopoNvlink(text)).toBe(true);
  });

  it('ignores NV-like text in NIC rows and non-GPU columns', () => {
    const text = '\tGPU0\tGPU1\tNIC0\nGPU0\t X \tPHB\tNV1\nGPU1\tPHB\t X \tPIX\nNIC0\tNV1\tPIX\t X \n';
    expect(parseTopoNvlink(text)).toBe(false);
  });

  it('handles space-separated output', () => {
    const text = '        GPU0    GPU1    CPU Affinity\nGPU0     X      NV12    0-15\nGPU1    NV12     X      0-15\n';
    expect(parseTopoNvlink(text)).toBe(true);
  });

  it('is false for empty or unrelated text', () => {
    expect(parseTopoNvlink('')).toBe(false);
    expect(parseTopoNvlink(captured('nvidia-smi-d-driver-not-loaded.txt'))).toBe(false);
  });
});
