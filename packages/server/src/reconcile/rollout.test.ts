import { describe, expect, it } from '@jest/globals';
import type { Model } from '@llmgw/shared';
import type { Replica, RolloutRecord } from '../domain.js';
import { makeModel, makeNode, makeProfile, makeReplica } from '../../test/factories.js';
import { created, snapshot, updated } from './fixtures.js';
import type { ReconcileInput } from './input.js';
import { reconcile } from './reconcile.js';
import { describeChange, revisionContent, revisionOf } from './revision.js';

const OLD = 'aaaaaaaaaaaa';
const NEW = 'bbbbbbbbbbbb';
const two = makeModel({ scaling: { min: 2, max: 2 } });
const onNode = (id: string, node: string, extra: Partial<Replica> = {}) =>
  makeReplica({
    id,
    revision: OLD,
    readySinceMs: 0,
    shards: [{ id: `${id}-0`, nodeId: node, rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }],
    ...extra,
  });
const serving = [onNode('r-1', 'node-1'), onNode('r-2', 'node-2')];

/** A pass over two replicas of revision OLD while the catalog says NEW. */
function pass(o: Partial<ReconcileInput> & { model?: Model; record?: RolloutRecord } = {}) {
  const { model = two, record, ...rest } = o;
  return reconcile(
    snapshot({
      models: [model],
      replicas: serving,
      nodes: [makeNode({ id: 'node-1' }), makeNode({ id: 'node-2' }), makeNode({ id: 'node-3' })],
      revisions: new Map([[model.name, NEW]]),
      ...(record ? { rollouts: new Map([[model.name, record]]) } : {}),
      ...rest,
    }),
  );
}
const codes = (p: { actions: { code: string }[] }) => p.actions.map((a) => a.code);

describe('revisions', () => {
  const base = makeModel({ profiles: [makeProfile({ args: ['--ctx', '4096'] })] });

  it('change with what the process runs, not with scaling, aliases, fallbacks, routing, adapter_routing, responses_api or rollout settings', () => {
    const same = {
      ...base,
      scaling: { min: 3, max: 5 },
      aliases: ['q'],
      fallbacks: ['other'],
      routing: 'least-loaded' as const,
      adapter_routing: 'none' as const,
      rollout: { max_surge: 2 },
    };
    expect(revisionOf(same)).toBe(revisionOf(base));
    // The gateway reads responses_api from the catalog as it is: flipping it restarts nothing (review of issue 29).
    expect(revisionOf({ ...base, profiles: [makeProfile({ args: ['--ctx', '4096'], responses_api: true })] })).toBe(revisionOf(base));
    expect(revisionOf({ ...base, profiles: [makeProfile({ args: ['--ctx', '8192'] })] })).not.toBe(revisionOf(base));
    expect(revisionOf({ ...base, sha256: 'f'.repeat(64) })).not.toBe(revisionOf(base));
    expect(revisionOf({ ...base, profiles: [makeProfile({ args: ['--ctx', '4096'], env: { A: '1' } })] })).not.toBe(revisionOf(base));
  });

  it('are the same again when the file is reverted, whatever order its keys are written in', () => {
    const reordered = JSON.parse(JSON.stringify({ profiles: base.profiles, source: base.source, name: base.name })) as Model;
    expect(revisionOf(reordered)).toBe(revisionOf(base));
  });

  it('describe a change in one line, profiles by name, env values never shown', () => {
    const after = { ...base, profiles: [makeProfile({ args: ['--ctx', '8192'], env: { HF_TOKEN: 'hf_secret' } })] };
    const line = describeChange(revisionContent(base), revisionContent(after));
    expect(line).toBe('profiles.cpu.args: ["--ctx","4096"] → ["--ctx","8192"]; profiles.cpu.env.HF_TOKEN: … (added)');
    expect(describeChange(undefined, revisionContent(base))).toBe('first revision');
  });
});

describe('rollouts', () => {
  it('start one surge replacement of the new revision first, and leave both old replicas serving', () => {
    const p = pass();
    expect(codes(p)).toEqual(['rollout']);
    expect(created(p)[0]).toMatchObject({ replaces: 'r-1', revision: NEW });
    expect(p.rollouts.get(two.name)).toMatchObject({ state: 'progressing', replicas: 2, updated: 1, ready: 0, outdated: 2 });
  });

  it('step an old replica down once its replacement is ready and healthy, and start the next', () => {
    const ready = onNode('r-3', 'node-3', { revision: NEW, replaces: 'r-1', readySinceMs: 1_000_000 - 5_000 });
    const p = pass({ replicas: [...serving, ready] });
    expect(codes(p)).toEqual(['rolled-over', 'rollout']);
    expect(updated(p)[0]).toMatchObject({ id: 'r-1', state: 'draining' });
    expect(created(p)[0]).toMatchObject({ replaces: 'r-2', revision: NEW });
    const young = pass({ replicas: [...serving, { ...ready, readySinceMs: 1_000_000 - 1_000 }] });
    expect(codes(young)).toEqual([]);
  });

  it('start up to max_surge replacements at once', () => {
    const p = pass({ model: { ...two, rollout: { max_surge: 2 } } });
    expect(created(p).map((c) => c.replaces)).toEqual(['r-1', 'r-2']);
  });

  it('where no node has room for a surge replica, replace in place only as max_unavailable allows, else wait and say why', () => {
    const big = { ...two, profiles: [makeProfile({ min_memory_gb: 40 })] };
    const nodes = [makeNode({ id: 'node-1' }), makeNode({ id: 'node-2' })];
    const replicas = serving.map((r) => ({ ...r, memoryMb: 40 * 1024 }));
    const waiting = pass({ model: big, nodes, replicas });
    expect(codes(waiting)).toEqual([]);
    expect(waiting.rollouts.get(two.name)).toMatchObject({ state: 'waiting' });
    expect(waiting.rollouts.get(two.name)!.reason).toMatch(/no room for a surge replica: .*max_unavailable 0 allows no replica out of service/);
    expect(waiting.attempts.get(two.name)?.placement).toBeUndefined();
    const inPlace = pass({ model: { ...big, rollout: { max_unavailable: 1 } }, nodes, replicas });
    expect(codes(inPlace)).toEqual(['rollout-in-place']);
    expect(updated(inPlace).map((u) => [u.id, u.state])).toEqual([['r-1', 'draining']]);
    // max_surge 0 never tries a surge replica: straight to in place, one at a time.
    const noSurge = pass({ model: { ...big, rollout: { max_surge: 0, max_unavailable: 1 } }, nodes, replicas });
    expect(codes(noSurge)).toEqual(['rollout-in-place']);
    expect(updated(noSurge)[0]!.drainReason).toBe('max_surge is 0; replaced in place (max_unavailable 1)');
    // The next pass: r-1 is leaving and one is out of service, so r-2 waits.
    const next = pass({
      model: { ...big, rollout: { max_unavailable: 1 } },
      nodes,
      replicas: [{ ...replicas[0]!, state: 'draining', drainStartedMs: 999_000 }, replicas[1]!],
      inFlight: new Map([['r-1', 1]]),
    });
    expect(codes(next)).toEqual([]);
  });

  it('halt when a new replica fails: the old ones keep serving, nothing more is replaced, and new replicas run the old spec', () => {
    const failed = onNode('r-3', 'node-3', { revision: NEW, replaces: 'r-1', state: 'failed', error: 'engine exited with status 1: unknown flag --bogus' });
    const p = pass({ replicas: [...serving, failed] });
    expect(p.halts).toEqual([
      { model: two.name, revision: NEW, reason: 'replica r-3 of revision bbbbbbbbbbbb failed: engine exited with status 1: unknown flag --bogus' },
    ]);
    // Past its backoff the failed replica is removed; no replacement of it, no other step.
    expect(codes(p)).toEqual(['failed']);
    expect(p.rollouts.get(two.name)).toMatchObject({ state: 'halted', reason: expect.stringContaining('unknown flag --bogus') });
    // Stored, the halt holds once the failed replica is gone; a scale-up runs what r-1 runs.
    const record: RolloutRecord = { model: two.name, history: [], halted: { revision: NEW, reason: 'r-3 failed', atMs: 1 } };
    const spec = { engine: 'llama.cpp', source: 'old', args: ['--old'], env: {} };
    const later = pass({ model: { ...two, scaling: { min: 3, max: 3 } }, record, replicas: serving.map((r) => ({ ...r, spec })) });
    expect(codes(later)).toEqual(['scale-up']);
    expect(created(later)[0]).toMatchObject({ revision: OLD, spec });
    // A resume after the halt lifts it: the rollout goes on.
    const resumed = pass({ record: { ...record, resumed: { revision: NEW, atMs: 2 } } });
    expect(codes(resumed)).toEqual(['rollout']);
  });

  it('halt when a new replica is not ready by progress_deadline_s, and remove it', () => {
    const slow = onNode('r-3', 'node-3', { revision: NEW, replaces: 'r-1', state: 'starting', createdAtMs: 1_000_000 - 60_000 });
    const model = { ...two, rollout: { progress_deadline_s: 60 } };
    const p = pass({ model, replicas: [...serving, slow] });
    expect(codes(p)).toEqual(['rollout-halted']);
    expect(p.halts[0]!.reason).toMatch(/r-3 .* not ready within progress_deadline_s \(60s\)/);
    expect(codes(pass({ model, replicas: [...serving, { ...slow, createdAtMs: 1_000_000 - 59_000 }] }))).toEqual([]);
  });

  it('pause on ctl rollout pause, and after pause_after replicas until resumed', () => {
    expect(codes(pass({ record: { model: two.name, history: [], paused: true } }))).toEqual([]);
    const canary = onNode('r-3', 'node-3', { revision: NEW, readySinceMs: 0 });
    const model = { ...two, rollout: { pause_after: 1 } };
    const held = pass({ model, replicas: [serving[0]!, canary] });
    expect(codes(held)).toEqual([]);
    expect(held.rollouts.get(two.name)).toMatchObject({ state: 'paused', reason: expect.stringContaining('pause_after') });
    const resumed = pass({ model, replicas: [serving[0]!, canary], record: { model: two.name, history: [], resumed: { revision: NEW, atMs: 1 } } });
    expect(codes(resumed)).toEqual(['rollout']);
  });

  it('on a revert, take the serving replicas as current and drop the new revision’s unready ones', () => {
    const starting = onNode('r-3', 'node-3', { revision: NEW, replaces: 'r-1', state: 'starting' });
    const nodes = [makeNode({ id: 'node-1' }), makeNode({ id: 'node-2' }), makeNode({ id: 'node-3' })];
    const p = reconcile(snapshot({ models: [two], nodes, replicas: [...serving, starting], revisions: new Map([[two.name, OLD]]) }));
    expect(codes(p)).toEqual(['outdated-not-serving']);
    expect(p.rollouts.get(two.name)).toMatchObject({ state: 'complete', updated: 2, ready: 2, outdated: 0 });
  });

  it('are complete once the old replicas have left, not when they stop taking traffic', () => {
    const current = [onNode('r-3', 'node-3', { revision: NEW }), onNode('r-4', 'node-1', { revision: NEW })];
    const leaving = pass({ replicas: [...current, { ...serving[0]!, state: 'draining', drainStartedMs: 999_000 }], inFlight: new Map([['r-1', 1]]) });
    expect(leaving.rollouts.get(two.name)).toMatchObject({ state: 'progressing', reason: '1 old replica finishing in-flight requests' });
    expect(pass({ replicas: current }).rollouts.get(two.name)).toMatchObject({ state: 'complete', updated: 2, ready: 2 });
  });

  it('restart nothing when the revision is unchanged, or for replicas stored before revisions', () => {
    expect(codes(reconcile(snapshot({ models: [two], replicas: serving, revisions: new Map([[two.name, OLD]]) })))).toEqual([]);
    const legacy = serving.map(({ revision: _r, ...r }) => r);
    expect(codes(reconcile(snapshot({ models: [two], replicas: legacy, revisions: new Map([[two.name, NEW]]) })))).toEqual([]);
  });

  it('scale down an outdated replica before a current one', () => {
    const current = onNode('r-3', 'node-3', { revision: NEW, createdAtMs: -1 });
    const one = { ...two, scaling: { min: 1, max: 1, scale_down_delay_s: 0 } };
    const p = pass({ model: one, replicas: [serving[0]!, current] });
    expect(updated(p).map((u) => [u.id, u.state])).toEqual([['r-1', 'draining']]);
  });
});
