import { afterAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { ShardAssignment } from '@llmgw/shared';
import { StateFileStore, adoptionOf, fromRecord, isRecord, toRecord, type RecordedShard } from './state-file.js';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-state-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const a: ShardAssignment = {
  id: 's1',
  replica_id: 'r1',
  model: 'm',
  profile: 'p',
  engine: 'vllm',
  source: 's',
  rank: 0,
  shards: 1,
  gpus: ['GPU-1'],
  gpu_indices: [0],
  args: [],
  env: {},
  api_key: 'k',
};
const shard: RecordedShard = { a, fingerprint: 'v1:f', proc: { pid: 42, pgid: 42, startTime: 777 }, port: 30001, restarts: 2, http: true };
const log = pino({ level: 'silent' });

describe('adoptionOf', () => {
  it('forgets a dead or reused pid, finishes a recorded stop or a duplicate id, adopts the rest', () => {
    expect(adoptionOf({}, false, false)).toBe('forget');
    expect(adoptionOf({ retiring: true }, false, false)).toBe('forget');
    expect(adoptionOf({ retiring: true }, true, false)).toBe('finish-stop');
    expect(adoptionOf({}, true, true)).toBe('finish-stop');
    expect(adoptionOf({}, true, false)).toBe('adopt');
  });
});

describe('records', () => {
  it('round-trip a shard, snake_case on disk', () => {
    const rec = toRecord(shard, false);
    expect(rec).toEqual({
      id: 's1',
      replica_id: 'r1',
      fingerprint: 'v1:f',
      pid: 42,
      pgid: 42,
      start_time: 777,
      port: 30001,
      restarts: 2,
      http: true,
      assignment: a,
    });
    expect(fromRecord(rec)).toEqual(shard);
    expect(toRecord(shard, true).retiring).toBe(true);
  });

  it('an old record without http or restarts gets defaults', () => {
    const rec = { ...toRecord(shard, false), http: undefined as unknown as boolean, restarts: undefined as unknown as number };
    expect(fromRecord(rec)).toMatchObject({ http: true, restarts: 0 });
  });

  it('rejects entries that cannot be adopted safely', () => {
    const rec = toRecord(shard, false);
    expect(isRecord(rec)).toBe(true);
    expect(isRecord({ ...rec, pid: 0 })).toBe(false);
    expect(isRecord({ ...rec, pgid: 1.5 })).toBe(false);
    expect(isRecord({ ...rec, pgid: 1 })).toBe(false);
    expect(isRecord({ ...rec, start_time: '777' })).toBe(false);
    expect(isRecord({ ...rec, assignment: { ...a, id: 'other' } })).toBe(false);
    expect(isRecord(null)).toBe(false);
  });
});

describe('StateFileStore', () => {
  it('saves with mode 0600 and loads what it saved', () => {
    const dir = tmp();
    const store = new StateFileStore(dir, log);
    store.save([toRecord(shard, false)]);
    expect(fs.statSync(path.join(dir, 'shards.json')).mode & 0o777).toBe(0o600);
    expect(new StateFileStore(dir, log).load()).toEqual([toRecord(shard, false)]);
  });

  it('does not rewrite an unchanged file', () => {
    const dir = tmp();
    const store = new StateFileStore(dir, log);
    store.save([]);
    fs.writeFileSync(path.join(dir, 'shards.json'), 'edited');
    store.save([]);
    expect(fs.readFileSync(path.join(dir, 'shards.json'), 'utf8')).toBe('edited');
  });

  it('loads nothing from a missing file, a non-JSON file, or invalid entries', () => {
    const dir = tmp();
    const store = new StateFileStore(dir, log);
    expect(store.load()).toEqual([]);
    fs.writeFileSync(path.join(dir, 'shards.json'), '{not json');
    expect(store.load()).toEqual([]);
    fs.writeFileSync(path.join(dir, 'shards.json'), JSON.stringify({ version: 1, shards: [{ id: 'x' }, toRecord(shard, false)] }));
    expect(store.load().map((r) => r.id)).toEqual(['s1']);
  });
});
