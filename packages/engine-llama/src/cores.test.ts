import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BYTES_PER_THREAD, availableCores, defaultThreads, parseCpuMax } from './cores.js';

describe('cores and threads', () => {
  it('reads a cgroup v2 CPU quota', () => {
    expect(parseCpuMax('max 100000\n')).toBeUndefined();
    expect(parseCpuMax('200000 100000\n')).toBe(2);
    expect(parseCpuMax('150000 100000')).toBe(2);
    expect(parseCpuMax('5000 100000')).toBe(1);
    expect(parseCpuMax('garbage')).toBeUndefined();
  });

  it('never counts more cores than a quota or the machine allows', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'llmgw-cpu-'));
    const file = path.join(dir, 'cpu.max');
    writeFileSync(file, '100000 100000\n');
    expect(availableCores(file)).toBe(1);
    expect(availableCores(path.join(dir, 'absent'))).toBe(Math.min(os.cpus().length, os.availableParallelism()));
  });

  it('gives a small model one thread and a big one every core', () => {
    expect(defaultThreads(466_240, 16)).toBe(1);
    expect(defaultThreads(3 * BYTES_PER_THREAD - 1, 16)).toBe(3);
    expect(defaultThreads(4.4 * 1024 ** 3, 2)).toBe(2);
    expect(defaultThreads(4.4 * 1024 ** 3, 64)).toBe(18);
    expect(defaultThreads(0, 8)).toBe(1);
  });
});
