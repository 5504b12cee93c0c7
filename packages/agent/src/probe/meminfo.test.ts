import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { parseMemTotalMb } from './meminfo.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const fixture = (rel: string): string => readFileSync(`${FIXTURES}${rel}`, 'utf8');

describe('parseMemTotalMb', () => {
  it('reads fixture G (2 TiB H100 host) as KiB and floors to MiB', () => {
    // 2113450212 KiB / 1024 = 2063916.22
    expect(parseMemTotalMb(fixture('proc/h100/meminfo'))).toBe(2063916);
  });

  it('reads the CPU fixtures exactly', () => {
    expect(parseMemTotalMb(fixture('proc/cpu-8gb/meminfo'))).toBe(8192);
    expect(parseMemTotalMb(fixture('proc/cpu-24gb/meminfo'))).toBe(24576);
    expect(parseMemTotalMb(fixture('proc/cpu-32gb/meminfo'))).toBe(32768);
  });

  it('reads the real line shape from the reference machine', () => {
    expect(parseMemTotalMb('MemTotal:       24683620 kB\nMemAvailable:   24173328 kB\n')).toBe(24105);
  });

  it('ignores MemTotal-like keys that are not MemTotal', () => {
    expect(parseMemTotalMb('SwapTotal: 4096 kB\nHugePages_Total:       0\n')).toBeUndefined();
  });

  it('is undefined when MemTotal is absent or not a number', () => {
    expect(parseMemTotalMb(fixture('proc/no-memtotal/meminfo'))).toBeUndefined();
    expect(parseMemTotalMb('')).toBeUndefined();
    expect(parseMemTotalMb('MemTotal: lots kB\n')).toBeUndefined();
  });

  it('finds MemTotal on a later line', () => {
    expect(parseMemTotalMb('MemFree: 1 kB\nMemTotal: 2048 kB\n')).toBe(2);
  });
});
