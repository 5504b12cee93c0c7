import { describe, expect, it } from '@jest/globals';
import { HeartbeatSchema, formatFailure, isHost, validate } from './index.js';
import type { Heartbeat } from './index.js';

const beat = (report: Record<string, unknown> = {}): Heartbeat => ({
  report: { node_id: 'node-a', hostname: 'node-a', mgmt_addr: '10.0.0.1', agent_version: '0.1.0', labels: {}, gpus: [], fabrics: [], ...report },
  shards: [],
});

const failure = (report: Record<string, unknown>) => {
  const r = validate(HeartbeatSchema, beat(report));
  return r.ok ? 'accepted' : formatFailure(r.error);
};

describe('mgmt_addr', () => {
  it.each(['10.0.0.1', 'gpu-1', 'gpu-1.lan', 'fd00::5', '::1', '::ffff:10.0.0.1', 'localhost'])('accepts %s', (addr) => {
    expect(failure({ mgmt_addr: addr })).toBe('accepted');
  });

  it.each(['http://10.0.0.1', '10.0.0.1:8080', 'evil.example/path', '1:8080', 'user@host', 'a b', '[::1]', 'fe80::1%eth0', '-x', 'a..b', '', 'h'.repeat(254)])(
    'refuses %j, naming the field and what it must be',
    (addr) => {
      expect(failure({ mgmt_addr: addr })).toMatch(
        /^report\.mgmt_addr must (be an IP address or a host name, without scheme, port or path|NOT have (more|fewer) than)/,
      );
    },
  );

  it('isHost is the same check', () => {
    expect([isHost('10.0.0.1'), isHost('x:1'), isHost('gpu-1.lan')]).toEqual([true, false, true]);
  });
});

describe('report bounds', () => {
  const labels = (n: number, key = (i: number) => `k${i}`, value = 'v') => Object.fromEntries(Array.from({ length: n }, (_, i) => [key(i), value]));
  const gpu = { index: 0, name: 'NVIDIA H100', class: 'H100-80GB', problems: [] };

  it.each([
    ['257 labels', { labels: labels(257) }, 'report.labels must NOT have more than 256 properties'],
    ['an empty label key', { labels: { '': 'v' } }, 'report.labels must NOT have fewer than 1 characters'],
    ['a label key of 318 characters', { labels: labels(1, () => 'k'.repeat(318)) }, 'report.labels must NOT have more than 317 characters'],
    ['a label value of 4097 characters', { labels: labels(1, () => 'k', 'v'.repeat(4097)) }, 'report.labels.k must NOT have more than 4096 characters'],
    ['257 GPUs', { gpus: Array.from({ length: 257 }, () => gpu) }, 'report.gpus must NOT have more than 256 items'],
    ['a GPU name of 257 characters', { gpus: [{ ...gpu, name: 'n'.repeat(257) }] }, 'report.gpus[0].name must NOT have more than 256 characters'],
    [
      '65 problems on one GPU',
      { gpus: [{ ...gpu, problems: Array.from({ length: 65 }, () => 'x') }] },
      'report.gpus[0].problems must NOT have more than 64 items',
    ],
    ['65 fabrics', { fabrics: Array.from({ length: 65 }, () => 'ib') }, 'report.fabrics must NOT have more than 64 items'],
    ['a fabric of 65 characters', { fabrics: ['f'.repeat(65)] }, 'report.fabrics[0] must NOT have more than 64 characters'],
    ['a hostname of 254 characters', { hostname: 'h'.repeat(254) }, 'report.hostname must NOT have more than 253 characters'],
    [
      'a cached file last used past what a Date holds',
      { files: [{ sha256: 'a'.repeat(64), source: 'llmgw://m.gguf', size_bytes: 1, last_used_ms: 8.64e15 + 1, in_use: false }] },
      'report.files[0].last_used_ms must be <= 8640000000000000',
    ],
    ['an agent version of 129 characters', { agent_version: 'v'.repeat(129) }, 'report.agent_version must NOT have more than 128 characters'],
  ])('refuses %s', (_what, report, message) => {
    expect(failure(report)).toBe(message);
  });

  it('accepts a report at every bound', () => {
    expect(failure({ labels: labels(256), gpus: Array.from({ length: 256 }, () => gpu), fabrics: Array.from({ length: 64 }, () => 'f'.repeat(64)) })).toBe(
      'accepted',
    );
  });
});
