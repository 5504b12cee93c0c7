import { describe, expect, it } from '@jest/globals';
import type { ExplainView, ModelView } from '@llmgw/shared';
import { modelPage } from './models-page.js';

const model: ModelView = {
  name: 'm',
  aliases: [],
  source: 's',
  min_replicas: 1,
  max_replicas: 1,
  ready_replicas: 1,
  total_replicas: 1,
  fallbacks: [],
  routing: 'cache-aware',
  profiles: ['cpu'],
};
const explain: ExplainView = { model: 'm', placed: true, attempted: false, notes: [], rejections: [] };

describe('dashboard: a model page with LoRA adapters (issue 31)', () => {
  it('lists each adapter with where it is loaded and why one cannot be served', () => {
    const adapters = [
      { name: 'sql-lora', source: '/m/sql.gguf', loaded_on: ['r-1', 'r-2'] },
      { name: 'chat-lora', source: 'https://files.invalid/…', loaded_on: [] },
    ];
    const text = modelPage({
      model: { ...model, adapters },
      replicas: [{ id: 'r-1', model: 'm', profile: 'cpu', state: 'ready', age_seconds: 1, adapters: ['chat-lora', 'sql-lora'], shards: [] }],
      explain,
      adapterProblems: { 'sql-lora': [], 'chat-lora': ['its file failed its checksum on replica r-3: <bad>'] },
      now: new Date(),
    }).main.toString();
    expect(text).toContain('<h2>LoRA adapters</h2>');
    const rows = [...text.matchAll(/<tr><th scope="row"><code>([\w-]+)<\/code><\/th><td><code>[^<]*<\/code><\/td><td>(.*?)<\/td>/g)].map((m) => [m[1], m[2]]);
    expect(rows).toEqual([
      ['sql-lora', 'r-1, r-2'],
      ['chat-lora', '<span class="muted">not loaded</span>'],
    ]);
    expect(text).toContain('cannot be served');
    // Each replica's own, in the replicas table, least recently used first.
    expect(text).toContain('<span class="sub">adapters loaded: chat-lora, sql-lora</span>');
    // Escaped, as everything an agent reports.
    expect(text).toContain('its file failed its checksum on replica r-3: &lt;bad&gt;');
  });

  it('has no such section for a model without adapters', () => {
    expect(modelPage({ model, replicas: [], explain, now: new Date() }).main.toString()).not.toContain('LoRA adapters');
  });
});
