import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { LOST_GPU_PROBLEM, queryGpus, runCommand } from './nvidia-smi/index.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const smi = (name: string): string => path.join(FIXTURES, 'nvidia-smi', name);

const tmp = mkdtempSync(path.join(os.tmpdir(), 'llmgw-smi-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const file = path.join(tmp, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('queryGpus against fixture scripts', () => {
  it('h100-lost-one: 7 healthy GPUs, GPU 3 lost, NVLink', async () => {
    const r = await queryGpus(smi('h100-lost-one'), 10_000);
    expect(r.nodeError).toBeUndefined();
    expect(r.nvlink).toBe(true);
    expect(r.gpus).toHaveLength(8);
    expect(r.gpus[3]).toStrictEqual({
      index: 3,
      bus_id: '00000000:5D:00.0',
      name: 'unknown',
      class: 'unknown',
      problems: [LOST_GPU_PROBLEM],
    });
    const healthy = r.gpus.filter((g) => g.problems.length === 0);
    expect(healthy.map((g) => g.index)).toEqual([0, 1, 2, 4, 5, 6, 7]);
    expect(healthy.every((g) => g.class === 'H100-80GB' && g.memory_total_mb === 81559 && g.uuid?.startsWith('GPU-'))).toBe(true);
    expect(r.warnings).toEqual([
      'nvidia-smi exited with a failure (exit 15: GPU has fallen off the bus or is otherwise inaccessible); accepted the 7 GPU rows it printed',
    ]);
  });

  it('rtx4090x2: two healthy GPUs, no NVLink', async () => {
    const r = await queryGpus(smi('rtx4090x2'), 10_000);
    expect(r).toStrictEqual({
      gpus: [
        {
          index: 0,
          uuid: 'GPU-6b0f3e21-7c44-4d2a-9f10-8a2e5c7d1b01',
          bus_id: '00000000:01:00.0',
          name: 'NVIDIA GeForce RTX 4090',
          class: 'RTX-4090',
          memory_total_mb: 24564,
          memory_used_mb: 1,
          problems: [],
        },
        {
          index: 1,
          uuid: 'GPU-c3a94d12-5e8b-4f67-b2d9-0e1f6a4b7c02',
          bus_id: '00000000:41:00.0',
          name: 'NVIDIA GeForce RTX 4090',
          class: 'RTX-4090',
          memory_total_mb: 24564,
          memory_used_mb: 1,
          problems: [],
        },
      ],
      nvlink: false,
      warnings: [],
    });
  });

  it('driver-broken: a node error, no GPUs', async () => {
    expect(await queryGpus(smi('driver-broken'), 10_000)).toStrictEqual({
      gpus: [],
      nvlink: false,
      nodeError: 'NVIDIA driver not loaded: nvidia-smi could not communicate with the driver (exit 9: driver not loaded)',
      warnings: [],
    });
  });
});

describe('queryGpus failure modes', () => {
  it('no nvidia-smi at all is a CPU node, not an error', async () => {
    expect(await queryGpus(path.join(tmp, 'no-such-nvidia-smi'), 5_000)).toStrictEqual({ gpus: [], nvlink: false, warnings: [] });
  });

  it('a hang becomes a node error', async () => {
    const hang = script('hang', 'exec sleep 5');
    const started = Date.now();
    const r = await queryGpus(hang, 300);
    expect(r.nodeError).toBe('nvidia-smi did not answer within 0.3s');
    expect(r.gpus).toEqual([]);
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('gives up even when an orphaned child keeps the pipes open', async () => {
    // Killing the shell leaves `sleep` holding stdout, so execFile never calls back.
    const hang = script('hang-orphan', 'sleep 4; echo late');
    const started = Date.now();
    const outcome = await runCommand(hang, [], 200);
    expect(outcome).toEqual({ kind: 'timeout' });
    expect(Date.now() - started).toBeLessThan(3_500);
  });

  it('retries once without health fields on an old driver, then remembers', async () => {
    const log = path.join(tmp, 'old-driver.log');
    const old = script(
      'old-driver',
      [
        `echo "$*" >> '${log}'`,
        'case "$*" in *remapped_rows*) echo \'Field "remapped_rows.failure" is not a valid field to query.\'; exit 2;; esac',
        'case "$1" in --query-gpu=*) echo "0, GPU-t4, Tesla T4, 00000000:00:04.0, 15360, 0"; exit 0;; esac',
        'exit 2',
      ].join('\n'),
    );
    const first = await queryGpus(old, 5_000);
    expect(first.nodeError).toBeUndefined();
    expect(first.gpus).toStrictEqual([
      { index: 0, uuid: 'GPU-t4', bus_id: '00000000:00:04.0', name: 'Tesla T4', class: 'T4', memory_total_mb: 15360, memory_used_mb: 0, problems: [] },
    ]);
    expect(first.warnings).toEqual(['this driver does not support the GPU health query fields; ECC and row-remap problems are not checked']);
    expect(readFileSync(log, 'utf8').trim().split('\n')).toEqual([
      '--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.failure --format=csv,noheader,nounits',
      '--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used --format=csv,noheader,nounits',
    ]);
    const second = await queryGpus(old, 5_000);
    expect(second.gpus).toHaveLength(1);
    // One more call, straight to the minimal list; no topo call for a single GPU.
    expect(readFileSync(log, 'utf8').trim().split('\n')).toHaveLength(3);
  });

  it('a failing topo -m costs only the NVLink flag', async () => {
    const twoGpus = script(
      'topo-fails',
      [
        'case "$1" in --query-gpu=*)',
        '  echo "0, GPU-a, NVIDIA L40S, 00000000:01:00.0, 46068, 0, 0, [N/A], No"',
        '  echo "1, GPU-b, NVIDIA L40S, 00000000:02:00.0, 46068, 0, 0, [N/A], No"',
        '  exit 0;;',
        'esac',
        'exit 3',
      ].join('\n'),
    );
    const r = await queryGpus(twoGpus, 5_000);
    expect(r.gpus.map((g) => g.class)).toEqual(['L40S', 'L40S']);
    expect(r.nvlink).toBe(false);
    expect(r.warnings).toEqual(['nvidia-smi topo -m failed (exit 3: not available on this device); NVLink not reported']);
  });
});
