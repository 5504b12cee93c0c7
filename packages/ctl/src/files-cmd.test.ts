import { describe, expect, it } from '@jest/globals';
import { Chalk } from 'chalk';
import type { ExplainView, ReplicaView } from '@llmgw/shared';
import { filesTable, sizeText } from './tables.js';
import { explainText, replicasTable } from './tables.js';

const plain = new Chalk({ level: 0 });
const progress = { done_bytes: 210_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 };
const shard = (o: Partial<ReplicaView['shards'][number]> = {}): ReplicaView['shards'][number] => ({
  id: 'r-1-0',
  node: 'cpu-a',
  rank: 0,
  gpus: [],
  state: 'starting',
  ...o,
});
const replica = (o: Partial<ReplicaView> = {}): ReplicaView => ({
  id: 'r-1',
  model: 'm',
  profile: 'cpu',
  state: 'starting',
  age_seconds: 7,
  shards: [shard({ download: progress })],
  ...o,
});

describe('a model file coming, in ctl', () => {
  it('replicas: the ERROR column says how far the download got', () => {
    expect(replicasTable([replica()], plain).split('\n')[1]).toMatch(
      /^r-1\s+m\s+cpu\s+starting\s+cpu-a\s+-\s+-\s+7s\s+downloading 45% \(210 of 466 MB, 30 MB\/s, 9 s left\)$/,
    );
    // One line per replica: every shard whose file comes, by node; an error wins.
    const two = replica({
      shards: [shard({ download: progress }), shard({ id: 'r-1-1', node: 'cpu-b', rank: 1, download: { done_bytes: 0, bytes_per_s: 0 } })],
    });
    expect(replicasTable([two], plain)).toContain('cpu-a: downloading 45% (210 of 466 MB, 30 MB/s, 9 s left); cpu-b: downloading 0 B (stalled)');
    expect(replicasTable([replica({ state: 'failed', error: 'sha256 mismatch' })], plain)).toContain('sha256 mismatch');
    expect(replicasTable([replica({ shards: [shard()] })], plain).split('\n')[1]).toMatch(/7s\s+-$/);
  });

  it('explain: a placed replica whose file still comes says so, after the summary', () => {
    const v: ExplainView = {
      model: 'm',
      placed: true,
      attempted: true,
      summary: 'placed m on cpu-a',
      notes: [],
      rejections: [],
      downloads: [{ replica: 'r-1', node: 'cpu-a', progress }],
    };
    expect(explainText(v, plain).split('\n')).toEqual([
      'placed m on cpu-a',
      'm has replicas (see ctl replicas --model m).',
      'replica r-1 on cpu-a: downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)',
    ]);
    expect(explainText({ ...v, attempted: false }, plain).split('\n')[1]).toBe('replica r-1 on cpu-a: downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)');
  });

  it('files: per node, with size, last use and whether a shard uses it', () => {
    const now = new Date('2026-01-01T12:00:00Z');
    const text = filesTable(
      [
        {
          node: 'cpu-a',
          sha256: 'ab'.repeat(32),
          source: 'https://files.example/m.gguf',
          size_bytes: 466_000_000,
          last_used: '2026-01-01T11:00:00Z',
          in_use: true,
        },
        { node: 'cpu-a', sha256: 'cd'.repeat(32), source: 'llmgw://old.gguf', size_bytes: 5 * 1024 ** 3, last_used: '2025-12-29T12:00:00Z', in_use: false },
      ],
      now,
    );
    expect(text.split('\n').map((l) => l.trimEnd().split(/\s{2,}/))).toEqual([
      ['NODE', 'SHA256', 'SIZE', 'LAST USED', 'IN USE', 'SOURCE'],
      ['cpu-a', 'abababababab', '444 MiB', '60m ago', 'yes', 'https://files.example/m.gguf'],
      ['cpu-a', 'cdcdcdcdcdcd', '5.0 GiB', '3d ago', 'no', 'llmgw://old.gguf'],
    ]);
    expect(filesTable([], now)).toMatch(/^No model files cached/);
    expect([sizeText(0), sizeText(1023), sizeText(1536), sizeText(40 * 1024 ** 3)]).toEqual(['0 B', '1023 B', '1.5 KiB', '40 GiB']);
  });
});
