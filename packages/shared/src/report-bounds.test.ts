import { describe, expect, it } from '@jest/globals';
import { HeartbeatSchema, REPORT_LIMITS, formatFailure, isHost, validate } from './index.js';
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
    ['65 labels', { labels: labels(65) }, 'report.labels must NOT have more than 64 properties'],
    ['an empty label key', { labels: { '': 'v' } }, 'report.labels must NOT have fewer than 1 characters'],
    ['a label key of 318 characters', { labels: labels(1, () => 'k'.repeat(318)) }, 'report.labels must NOT have more than 317 characters'],
    ['a label value of 1025 characters', { labels: labels(1, () => 'k', 'v'.repeat(1025)) }, 'report.labels.k must NOT have more than 1024 characters'],
    ['65 GPUs', { gpus: Array.from({ length: 65 }, () => gpu) }, 'report.gpus must NOT have more than 64 items'],
    ['a GPU name of 129 characters', { gpus: [{ ...gpu, name: 'n'.repeat(129) }] }, 'report.gpus[0].name must NOT have more than 128 characters'],
    [
      '17 problems on one GPU',
      { gpus: [{ ...gpu, problems: Array.from({ length: 17 }, () => 'x') }] },
      'report.gpus[0].problems must NOT have more than 16 items',
    ],
    // Issue 27: 60 GPUs with 64 problems of 1,000 characters each made one report 3.9 MB.
    [
      'a GPU problem of 257 characters',
      { gpus: [{ ...gpu, problems: ['p'.repeat(257)] }] },
      'report.gpus[0].problems[0] must NOT have more than 256 characters',
    ],
    ['a gpu_error of 1025 characters', { gpu_error: 'e'.repeat(1025) }, 'report.gpu_error must NOT have more than 1024 characters'],
    [
      '513 estimated sources',
      { estimated_sources: Array.from({ length: 513 }, (_, i) => `s${i}`) },
      'report.estimated_sources must NOT have more than 512 items',
    ],
    [
      'a cached file source of 2049 characters',
      { files: [{ sha256: 'a'.repeat(64), source: `https://h.invalid/${'x'.repeat(2031)}`, size_bytes: 1, last_used_ms: 0, in_use: false }] },
      'report.files[0].source must NOT have more than 2048 characters',
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
    expect(failure({ labels: labels(64), gpus: Array.from({ length: 64 }, () => gpu), fabrics: Array.from({ length: 64 }, () => 'f'.repeat(64)) })).toBe(
      'accepted',
    );
  });

  it('refuses 257 shard statuses and a log tail over its bound', () => {
    const shard = { id: 's', replica_id: 'r', state: 'ready' };
    const over = (shards: unknown[]) => {
      const r = validate(HeartbeatSchema, { ...beat(), shards });
      return r.ok ? 'accepted' : formatFailure(r.error);
    };
    expect(over(Array.from({ length: 257 }, () => shard))).toBe('shards must NOT have more than 256 items');
    expect(over([{ ...shard, log_tail: 't'.repeat(65537) }])).toBe('shards[0].log_tail must NOT have more than 65536 characters');
  });

  // The byte cap must never bite a real node: one with 8 GPUs, each with a few problems,
  // 32 labels, 200 cached files and 200 sources sized is far below it.
  it('a large real node reports well inside the byte cap', () => {
    const source = (i: number) => `https://models.example.invalid/org/model-${i}/resolve/main/model-${i}.Q4_K_M.gguf`;
    const big = beat({
      labels: labels(32, (i) => `example.com/label-${i}`, 'v'.repeat(64)),
      gpus: Array.from({ length: 8 }, (_, i) => ({
        ...gpu,
        index: i,
        uuid: `GPU-${'0'.repeat(8)}-0000-0000-0000-${String(i).padStart(12, '0')}`,
        bus_id: `00000000:${i}0:00.0`,
        problems: ['3 uncorrectable ECC errors', 'retired pages pending', 'row remapping failed'],
      })),
      files: Array.from({ length: 200 }, (_, i) => ({ sha256: 'a'.repeat(64), source: source(i), size_bytes: 4e9, last_used_ms: 1.7e12, in_use: false })),
      estimated_sources: Array.from({ length: 200 }, (_, i) => source(i)),
      source_estimates: Array.from({ length: 200 }, (_, i) => ({
        source: source(i),
        memory_mb: 9000,
        weights_mb: 8000,
        kv_cache_mb: 1000,
        context_length: 8192,
      })),
    });
    expect(failure(big.report)).toBe('accepted');
    const bytes = Buffer.byteLength(JSON.stringify(big.report));
    expect(bytes).toBeLessThan(REPORT_LIMITS.reportBytes / 2);
  });
});
