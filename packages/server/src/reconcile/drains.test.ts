import { describe, expect, it } from '@jest/globals';
import type { Replica } from '../domain.js';
import { makeModel, makeNode, makeProfile, makeReplica } from '../../test/factories.js';
import { drains, drainsFinished } from './drains.js';
import { planOf, updated } from './fixtures.js';

const codes = (plan: { actions: { code: string }[] }) => plan.actions.map((a) => a.code);
const onNode1 = (id: string, extra: Partial<Replica> = {}) =>
  makeReplica({ id, shards: [{ id: `${id}-0`, nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }], ...extra });

describe('drainsFinished', () => {
  const old = makeReplica({ state: 'draining', drainStartedMs: 1_000_000 - 1_000, drainReason: 'scaled down to 1 (in flight 0)' });

  it('removes a replica that stopped taking traffic once it has no request in flight, for the reason it stepped down', () => {
    const plan = planOf({ replicas: [old] });
    drainsFinished(plan);
    expect(plan.actions).toEqual([{ kind: 'remove', code: 'drained', replicaId: 'r-1', model: 'qwen-coder-14b', reason: 'scaled down to 1 (in flight 0)' }]);
  });

  it('waits for in-flight requests, up to the drain timeout', () => {
    const busy = planOf({ replicas: [old], inFlight: new Map([['r-1', 1]]) });
    drainsFinished(busy);
    expect(busy.actions).toEqual([]);
    const late = planOf({ replicas: [old], inFlight: new Map([['r-1', 1]]), nowMs: 1_000_000 - 1_000 + 60_000 });
    drainsFinished(late);
    expect(codes(late)).toEqual(['drained']);
  });
});

describe('drains', () => {
  const draining = (extra = {}) => [makeNode({ id: 'node-1', admin: 'draining', ...extra }), makeNode({ id: 'node-2' }), makeNode({ id: 'node-3' })];

  it('plans a replacement away from the draining node, and leaves the old replica serving', () => {
    const plan = planOf({ nodes: draining(), replicas: [onNode1('r-1')] });
    drains(plan);
    expect(codes(plan)).toEqual(['drain-replacement']);
    const [created] = plan.creations();
    expect(created).toMatchObject({ replaces: 'r-1', state: 'pending' });
    expect(created!.shards[0]!.nodeId).not.toBe('node-1');
    expect(updated(plan)).toEqual([]);
  });

  it('starts at most drainParallel replacements of a model at once', () => {
    const plan = planOf({ nodes: draining(), replicas: [onNode1('r-1'), onNode1('r-2')] });
    drains(plan);
    expect(plan.creations().map((c) => c.replaces)).toEqual(['r-1']);
    const two = planOf({ nodes: draining(), replicas: [onNode1('r-1'), onNode1('r-2')], policy: { ...planOf().input.policy, drainParallel: 2 } });
    drains(two);
    expect(two.creations().map((c) => c.replaces)).toEqual(['r-1', 'r-2']);
  });

  it('stops at once with --force, past the deadline, or when the replica was not serving yet', () => {
    const forced = planOf({ nodes: draining({ drainForce: true }), replicas: [onNode1('r-1')] });
    drains(forced);
    expect(codes(forced)).toEqual(['drain-forced']);
    const late = planOf({ nodes: draining({ drainDeadlineMs: 1_000_000 }), replicas: [onNode1('r-1')] });
    drains(late);
    expect(codes(late)).toEqual(['drain-deadline']);
    const starting = planOf({ nodes: draining(), replicas: [onNode1('r-1', { state: 'starting' })] });
    drains(starting);
    expect(codes(starting)).toEqual(['drain-not-serving']);
  });

  it('records why the replica cannot move, once, and clears it when the replacement is placed', () => {
    const model = makeModel({ profiles: [makeProfile({ min_memory_gb: 48 })] });
    const full = [makeNode({ id: 'node-1', admin: 'draining' }), makeNode({ id: 'node-2', memoryTotalMb: 32 * 1024 })];
    const blocked = planOf({ models: [model], nodes: full, replicas: [onNode1('r-1', { memoryMb: 48 * 1024 })] });
    drains(blocked);
    expect(codes(blocked)).toEqual(['drain-blocked']);
    const summary = updated(blocked)[0]!.drainBlocked!;
    expect(summary).toMatch(/^0\/2 nodes can run qwen-coder-14b/);
    const again = planOf({ models: [model], nodes: full, replicas: [onNode1('r-1', { memoryMb: 48 * 1024, drainBlocked: summary })] });
    drains(again);
    expect(again.actions).toEqual([]);
    const room = planOf({ nodes: draining(), replicas: [onNode1('r-1', { drainBlocked: 'no room' })] });
    drains(room);
    expect(codes(room)).toEqual(['drain-replacement', 'drain-unblocked']);
    expect(updated(room)[0]!.drainBlocked).toBeUndefined();
  });

  it('names the error of a failed replacement, places none beside it, and stops after two failures the same way', () => {
    const failedRepl = (id: string, error: string) =>
      makeReplica({
        id,
        replaces: 'r-1',
        state: 'failed',
        error,
        shards: [{ id: `${id}-0`, nodeId: 'node-2', rank: 0, gpuUuids: [], gpuIndices: [], state: 'failed' }],
      });
    const eacces = 'cannot read /root/.llmgw/models/tiny.gguf: EACCES';
    // First failure: the drain says why and waits out the backoff rather than placing another.
    const first = planOf({ nodes: draining(), replicas: [onNode1('r-1'), failedRepl('r-2', eacces)] });
    drains(first);
    expect(codes(first)).toEqual(['drain-blocked']);
    const r1 = updated(first)[0]!;
    expect(r1.drainBlocked).toBe(`replacement r-2 failed: ${eacces}`);
    expect(r1.drainFailures).toEqual({ error: eacces, count: 1 });
    // Passes later, the same failed replacement is not counted again.
    const same = planOf({ nodes: draining(), replicas: [r1, failedRepl('r-2', eacces)] });
    drains(same);
    expect(same.actions).toEqual([]);
    // Its backoff over and it removed, the next replacement is placed (and the block cleared).
    const retry = planOf({ nodes: draining(), replicas: [r1] });
    drains(retry);
    expect(codes(retry)).toEqual(['drain-replacement', 'drain-unblocked']);
    const r1b = { ...r1, drainBlocked: undefined };
    delete r1b.drainBlocked;
    // The second fails the same way: the drain stops trying, and says what to do.
    const second = planOf({ nodes: draining(), replicas: [r1b, failedRepl('r-3', eacces)] });
    drains(second);
    const r1c = updated(second)[0]!;
    expect(r1c.drainFailures).toEqual({ error: eacces, count: 2 });
    expect(r1c.drainBlocked).toMatch(
      /^2 replacements failed the same way, the last r-3: cannot read .*EACCES; fix that, then uncordon the node and drain it again/,
    );
    const stopped = planOf({ nodes: draining(), replicas: [r1c] });
    drains(stopped);
    expect(stopped.actions).toEqual([]);
    expect(stopped.creations()).toEqual([]);
    // Another error starts the count again.
    const other = planOf({ nodes: draining(), replicas: [r1, failedRepl('r-4', 'exited with code 1')] });
    drains(other);
    expect(updated(other)[0]!.drainFailures).toEqual({ error: 'exited with code 1', count: 1 });
    // Uncordoned: the record is cleared, so a later drain starts afresh.
    const uncordoned = planOf({ nodes: [makeNode({ id: 'node-1' }), makeNode({ id: 'node-2' })], replicas: [r1c] });
    drains(uncordoned);
    expect(codes(uncordoned)).toEqual(['drain-unblocked']);
    expect(updated(uncordoned)[0]!.drainFailures).toBeUndefined();
  });

  it('moves traffic once the replacement has been ready for the minimum healthy time', () => {
    const repl = (readySinceMs: number) =>
      makeReplica({
        id: 'r-2',
        replaces: 'r-1',
        readySinceMs,
        shards: [{ id: 'r-2-0', nodeId: 'node-2', rank: 0, gpuUuids: [], gpuIndices: [], state: 'ready' }],
      });
    const young = planOf({ nodes: draining(), replicas: [onNode1('r-1'), repl(1_000_000 - 4_999)] });
    drains(young);
    expect(young.actions).toEqual([]);
    const healthy = planOf({ nodes: draining(), replicas: [onNode1('r-1'), repl(1_000_000 - 5_000)] });
    drains(healthy);
    expect(healthy.actions).toEqual([
      {
        kind: 'update',
        code: 'traffic-moved',
        replicaId: 'r-1',
        model: 'qwen-coder-14b',
        reason: 'node node-1 drained; traffic moved to r-2',
        replica: updated(healthy)[0],
      },
    ]);
    expect(updated(healthy)[0]).toMatchObject({ state: 'draining', drainStartedMs: 1_000_000, drainReason: 'node node-1 drained; traffic moved to r-2' });
    // The snapshot is not changed: the update is a copy.
    expect(healthy.input.replicas[0]!.state).toBe('ready');
  });
});
