import { describe, expect, it } from '@jest/globals';
import type { ExplainView, ModelView, ReplicaView, RolloutView } from '@llmgw/shared';
import { modelPage } from './models-page.js';

const model: ModelView = {
  name: 'm',
  aliases: [],
  source: 's',
  min_replicas: 2,
  max_replicas: 2,
  ready_replicas: 2,
  total_replicas: 3,
  fallbacks: [],
  routing: 'cache-aware',
  profiles: ['cpu'],
};
const replica: ReplicaView = { id: 'r-1', model: 'm', profile: 'cpu', state: 'ready', revision: 'aaaaaaaaaaaa', age_seconds: 3, shards: [] };
const explain: ExplainView = { model: 'm', placed: true, attempted: false, notes: [], rejections: [] };
const rollout = (o: Partial<RolloutView>): RolloutView => ({
  model: 'm',
  revision: 'bbbbbbbbbbbb',
  state: 'progressing',
  replicas: 2,
  updated: 1,
  ready: 0,
  outdated: 2,
  max_surge: 1,
  max_unavailable: 0,
  progress_deadline_s: 600,
  paused: false,
  history: [{ revision: 'bbbbbbbbbbbb', since: '2026-12-02T10:00:00.000Z', change: 'profiles.cpu.args: [] → ["--x"]', current: true }],
  ...o,
});
const page = (r?: RolloutView) => modelPage({ model, replicas: [replica], explain, now: new Date(), ...(r ? { rollout: r } : {}) }).main.toString();

describe('dashboard: a model page during a rollout', () => {
  it('shows a rollout in progress with its change, and a halted one with its reason, as an alert', () => {
    const going = page(rollout({}));
    expect(going).toContain('1 of 2 replicas run revision <code>bbbbbbbbbbbb</code>, 0 ready; 2 of an earlier revision');
    expect(going).toContain('profiles.cpu.args: [] → [&quot;--x&quot;]');
    const halted = page(rollout({ state: 'halted', reason: 'replica r-3 failed: exit 3' }));
    expect(halted).toContain('<section class="alert"');
    expect(halted).toContain('<b>replica r-3 failed: exit 3</b>');
    expect(going).toContain('<span class="sub">revision aaaaaaaaaaaa</span>');
  });

  it('shows nothing of a complete rollout', () => {
    expect(page(rollout({ state: 'complete', updated: 2, ready: 2, outdated: 0 }))).not.toContain('id="rollout"');
  });
});
