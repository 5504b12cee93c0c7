import { describe, expect, it } from '@jest/globals';
import type { ExplainView, ModelView, ReplicaView } from '@llmgw/shared';
import { modelPage } from './models-page.js';

/** A model page while a replica's file comes: the shard and the explanation say how far it got. */
const progress = { done_bytes: 210_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 };
const model: ModelView = {
  name: 'm',
  aliases: [],
  source: 'https://files.example/m.gguf',
  min_replicas: 1,
  max_replicas: 1,
  ready_replicas: 0,
  total_replicas: 1,
  fallbacks: [],
  routing: 'cache-aware',
  profiles: ['cpu'],
};
const replica: ReplicaView = {
  id: 'r-1',
  model: 'm',
  profile: 'cpu',
  state: 'starting',
  age_seconds: 3,
  shards: [{ id: 'r-1-0', node: 'cpu-a', rank: 0, gpus: [], state: 'starting', download: progress }],
};
const explain: ExplainView = {
  model: 'm',
  placed: true,
  attempted: true,
  summary: 'placed m on cpu-a',
  notes: [],
  rejections: [],
  downloads: [{ replica: 'r-1', node: 'cpu-a', progress }],
};

describe('dashboard: a model file coming', () => {
  it('shows the progress under the shard state and in the explanation', () => {
    const text = modelPage({ model, replicas: [replica], explain, now: new Date() }).main.toString();
    expect(text).toContain('<span class="sub">downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)</span>');
    expect(text).toContain('<li><b>r-1</b> on cpu-a: downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)</li>');
    const { download: _gone, ...started } = replica.shards[0]!;
    const none = modelPage({ model, replicas: [{ ...replica, shards: [started] }], explain: { ...explain, downloads: [] }, now: new Date() }).main.toString();
    expect(none).not.toContain('downloading');
  });
});
