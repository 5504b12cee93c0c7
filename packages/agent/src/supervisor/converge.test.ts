import { describe, expect, it } from '@jest/globals';
import type { ShardAssignment } from '@llmgw/shared';
import { blockerOf, fingerprint, planConverge } from './converge.js';

const assignment = (id: string, over: Partial<ShardAssignment> = {}): ShardAssignment => ({
  id,
  replica_id: `rep-${id}`,
  model: 'm',
  profile: 'p',
  engine: 'vllm',
  source: 's',
  rank: 0,
  shards: 1,
  gpus: [`GPU-${id}`],
  gpu_indices: [0],
  args: [],
  env: {},
  ...over,
});
const running = (a: ShardAssignment) => ({ a, fingerprint: fingerprint(a) });

describe('fingerprint', () => {
  it('ignores the startup timeout and the GPU indices', () => {
    const a = assignment('a');
    expect(fingerprint({ ...a, startup_timeout_s: 5, gpu_indices: [3] })).toBe(fingerprint(a));
  });

  it('changes with anything that shapes the process, whatever the key order', () => {
    const a = assignment('a', { env: { A: '1', B: '2' } });
    expect(fingerprint({ ...a, args: ['--x'] })).not.toBe(fingerprint(a));
    expect(fingerprint({ ...a, gpus: ['GPU-other'] })).not.toBe(fingerprint(a));
    expect(fingerprint({ ...a, env: { B: '2', A: '1' } })).toBe(fingerprint(a));
  });
});

describe('planConverge', () => {
  it('keeps matching shards, retires dropped and changed ones, starts the rest', () => {
    const kept = running(assignment('kept'));
    const dropped = running(assignment('dropped'));
    const changed = running(assignment('changed'));
    const newer = { ...assignment('kept'), startup_timeout_s: 9 };
    const plan = planConverge([kept, dropped, changed], [newer, assignment('changed', { args: ['--new'] }), assignment('fresh')]);
    expect(plan.keep).toEqual([{ shard: kept, assignment: newer }]);
    expect(plan.retire).toEqual([dropped, changed]);
    expect(plan.start.map((a) => [a.id, a.args])).toEqual([
      ['changed', ['--new']],
      ['fresh', []],
    ]);
  });

  it('an empty list retires everything', () => {
    const a = running(assignment('a'));
    expect(planConverge([a], [])).toEqual({ retire: [a], keep: [], start: [] });
  });
});

describe('blockerOf', () => {
  it('is a stopping engine with the same id or a shared GPU', () => {
    const me = running(assignment('me', { gpus: ['GPU-1', 'GPU-2'] }));
    const sameId = running(assignment('me', { gpus: ['GPU-9'] }));
    const sameGpu = running(assignment('other', { gpus: ['GPU-2'] }));
    const apart = running(assignment('apart', { gpus: ['GPU-3'] }));
    expect(blockerOf(me, [apart])).toBeUndefined();
    expect(blockerOf(me, [apart, sameGpu])).toBe(sameGpu);
    expect(blockerOf(me, [sameId])).toBe(sameId);
  });
});
