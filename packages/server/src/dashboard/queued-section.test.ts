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
const page = (queued?: { interactive: number; standard: number; batch: number }) =>
  modelPage({ model, replicas: [], explain, now: new Date(), ...(queued ? { queued } : {}) }).main.toString();

describe('dashboard: a model page with requests waiting in the gateway', () => {
  it('shows the requests waiting per band, highest band first, and says why they wait', () => {
    const text = page({ interactive: 2, standard: 0, batch: 7 });
    expect(text).toContain('<h2>Queued in the gateway</h2>');
    const rows = [...text.matchAll(/<tr><th scope="row">(\w+)<\/th><td class="num">(\d+)<\/td><\/tr>/g)].map((m) => [m[1], m[2]]);
    expect(rows).toEqual([
      ['interactive', '2'],
      ['standard', '0'],
      ['batch', '7'],
    ]);
    expect(text).toContain('Every replica is saturated');
    expect(page({ interactive: 0, standard: 0, batch: 0 })).toContain('Nothing waits: some replica has room.');
  });

  it('has no such section when the server gives no queue (a page rendered alone)', () => {
    expect(page()).not.toContain('Queued in the gateway');
  });
});
