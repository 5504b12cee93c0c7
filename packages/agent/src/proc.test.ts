import { describe, it, expect } from '@jest/globals';
import { groupExists, isSameProcess, parseProcStat, readProcStat } from './proc.js';

describe('parseProcStat', () => {
  it('reads state, pgrp and start time past a command name with spaces and parentheses', () => {
    const line = '4242 (vllm (worker) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 987654 1000000 200 18446744073709551615\n';
    expect(parseProcStat(line)).toEqual({ state: 'S', pgrp: 4242, startTime: 987654 });
  });

  it('rejects garbage', () => {
    expect(parseProcStat('nonsense')).toBeNull();
    expect(parseProcStat('1 (x) S 1')).toBeNull();
  });
});

describe('real /proc', () => {
  it('identifies this process by pid and start time', () => {
    const stat = readProcStat(process.pid)!;
    expect(stat.state).not.toBe('Z');
    expect(isSameProcess(process.pid, stat.startTime)).toBe(true);
    expect(isSameProcess(process.pid, stat.startTime + 1)).toBe(false);
    expect(readProcStat(2 ** 22 + 1)).toBeNull();
  });

  it('sees our own process group', () => {
    expect(groupExists(readProcStat(process.pid)!.pgrp)).toBe(true);
  });
});
