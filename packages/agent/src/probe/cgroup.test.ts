import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { cgroupAncestors, minDefined, parseMemoryLimitBytes, parseProcCgroup, readCgroupLimitMb } from './cgroup.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const GiB = 1024 * 1024 * 1024;

describe('parseProcCgroup', () => {
  it('reads the single v2 line', () => {
    expect(parseProcCgroup('0::/system.slice/llm-agent.service\n')).toEqual({ v2: '/system.slice/llm-agent.service' });
  });

  it('reads the v1 memory controller line among others (hybrid host)', () => {
    const text = [
      '12:cpuset:/',
      '11:cpu,cpuacct:/system.slice/llm-agent.service',
      '7:memory:/system.slice/llm-agent.service',
      '1:name=systemd:/system.slice/llm-agent.service',
      '0::/system.slice/llm-agent.service',
      '',
    ].join('\n');
    expect(parseProcCgroup(text)).toEqual({
      v1Memory: '/system.slice/llm-agent.service',
      v2: '/system.slice/llm-agent.service',
    });
  });

  it('finds memory in a combined controller list and keeps colons in the path', () => {
    expect(parseProcCgroup('4:memory,hugetlb:/docker/a:b\n')).toEqual({ v1Memory: '/docker/a:b' });
  });

  it('returns nothing for text without cgroup lines', () => {
    expect(parseProcCgroup('garbage\n')).toEqual({});
  });
});

describe('parseMemoryLimitBytes', () => {
  it('treats v2 "max" as no limit', () => {
    expect(parseMemoryLimitBytes('max\n')).toBeUndefined();
  });

  it('reads a byte count', () => {
    expect(parseMemoryLimitBytes('4294967296\n')).toBe(4 * GiB);
  });

  it('treats the v1 sentinel and anything above it as no limit', () => {
    expect(parseMemoryLimitBytes('9223372036854771712\n')).toBeUndefined();
    expect(parseMemoryLimitBytes('18446744073709551615')).toBeUndefined();
    expect(parseMemoryLimitBytes(String(64 * 1024 ** 4))).toBe(64 * 1024 ** 4);
  });

  it('treats unreadable text as no limit', () => {
    expect(parseMemoryLimitBytes('')).toBeUndefined();
    expect(parseMemoryLimitBytes('-1')).toBeUndefined();
  });
});

describe('cgroupAncestors', () => {
  it('lists the path and each parent up to the root', () => {
    expect(cgroupAncestors('/system.slice/x.service')).toEqual(['/system.slice/x.service', '/system.slice', '/']);
  });

  it('is just the root inside a cgroup namespace', () => {
    expect(cgroupAncestors('/')).toEqual(['/']);
  });

  it('cannot climb above the root', () => {
    expect(cgroupAncestors('/../../etc')).toEqual(['/etc', '/']);
  });
});

describe('minDefined', () => {
  it('skips undefined', () => {
    expect(minDefined([undefined, 5, 3, undefined])).toBe(3);
    expect(minDefined([undefined])).toBeUndefined();
  });
});

describe('readCgroupLimitMb', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'llmgw-cgroup-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  const tree = (name: string, files: Record<string, string>): { proc: string; sys: string } => {
    const root = path.join(tmp, name);
    for (const [rel, text] of Object.entries(files)) {
      const file = path.join(root, rel);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, text);
    }
    return { proc: path.join(root, 'proc'), sys: path.join(root, 'sys') };
  };

  it('takes the parent slice limit when the unit itself has none (fixture)', async () => {
    const limit = await readCgroupLimitMb(path.join(FIXTURES, 'proc/cgroup-capped'), path.join(FIXTURES, 'sys/cgroup-capped'));
    expect(limit).toBe(4096);
  });

  it('takes the smallest of unit and ancestors on v2', async () => {
    const t = tree('v2', {
      'proc/self/cgroup': '0::/system.slice/a.service\n',
      'sys/fs/cgroup/system.slice/a.service/memory.max': String(3 * GiB),
      'sys/fs/cgroup/system.slice/memory.max': String(6 * GiB),
      'sys/fs/cgroup/memory.max': 'max\n',
    });
    expect(await readCgroupLimitMb(t.proc, t.sys)).toBe(3072);
  });

  it('reads the container root limit when the namespace path is /', async () => {
    const t = tree('ns', { 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/memory.max': '1610612736\n' });
    expect(await readCgroupLimitMb(t.proc, t.sys)).toBe(1536);
  });

  it('reads v1 memory.limit_in_bytes along the path', async () => {
    const t = tree('v1', {
      'proc/self/cgroup': '5:memory:/docker/abc\n0::/\n',
      'sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': String(2 * GiB + 5),
      'sys/fs/cgroup/memory/docker/memory.limit_in_bytes': '9223372036854771712\n',
      'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
    });
    expect(await readCgroupLimitMb(t.proc, t.sys)).toBe(2048);
  });

  it('is undefined when v1 says unlimited everywhere', async () => {
    const t = tree('v1-unlimited', {
      'proc/self/cgroup': '5:memory:/user.slice\n',
      'sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes': '9223372036854771712\n',
    });
    expect(await readCgroupLimitMb(t.proc, t.sys)).toBeUndefined();
  });

  it('is undefined when the files are missing', async () => {
    const t = tree('missing', { 'proc/self/cgroup': '0::/system.slice/a.service\n' });
    expect(await readCgroupLimitMb(t.proc, t.sys)).toBeUndefined();
    expect(await readCgroupLimitMb(path.join(FIXTURES, 'proc/h100'), path.join(FIXTURES, 'sys/empty'))).toBeUndefined();
  });
});
