import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { isActivePortState, portFabric, readFabrics } from './fabrics.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

describe('portFabric', () => {
  it('maps the link layer of an active port', () => {
    expect(portFabric('4: ACTIVE\n', 'InfiniBand\n')).toBe('infiniband');
    expect(portFabric('4: ACTIVE\n', 'Ethernet\n')).toBe('roce');
  });

  it('ignores ports that are not active', () => {
    expect(portFabric('1: DOWN\n', 'InfiniBand\n')).toBeUndefined();
    expect(portFabric('2: INIT\n', 'InfiniBand\n')).toBeUndefined();
    expect(isActivePortState('5: ACTIVE_DEFER')).toBe(false);
  });

  it('ignores an unknown link layer', () => {
    expect(portFabric('4: ACTIVE', 'Unknown')).toBeUndefined();
  });
});

describe('readFabrics', () => {
  it('reports InfiniBand and skips the down Ethernet port', async () => {
    expect(await readFabrics(path.join(FIXTURES, 'sys/ib'))).toEqual(['infiniband']);
  });

  it('reports RoCE for an active Ethernet port', async () => {
    expect(await readFabrics(path.join(FIXTURES, 'sys/roce'))).toEqual(['roce']);
  });

  it('is empty without the infiniband class directory', async () => {
    expect(await readFabrics(path.join(FIXTURES, 'sys/empty'))).toEqual([]);
    expect(await readFabrics(path.join(FIXTURES, 'sys/does-not-exist'))).toEqual([]);
  });
});
