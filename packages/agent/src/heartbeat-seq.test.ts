import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { heartbeatSeqBase, seqFile, SEQ_PER_RUN } from './heartbeat-seq.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-seq-'));
  dirs.push(d);
  return d;
};

describe('heartbeatSeqBase', () => {
  it('starts past every seq of the start before, even with the clock set back', () => {
    const dir = tmp();
    const first = heartbeatSeqBase(dir, 1_000_000);
    expect(first).toBe(1_000_000_000);
    expect(fs.readFileSync(seqFile(dir), 'utf8').trim()).toBe(String(first));
    // The clock an hour back: the new start still counts above the old one's last heartbeat.
    const second = heartbeatSeqBase(dir, 1_000_000 - 3_600_000);
    expect(second).toBe(first + SEQ_PER_RUN);
    // The clock well ahead: it alone.
    expect(heartbeatSeqBase(dir, 5_000_000_000)).toBe(5_000_000_000_000);
  });

  it('a state directory that cannot be written leaves the clock', () => {
    const file = path.join(tmp(), 'not-a-dir');
    fs.writeFileSync(file, '');
    expect(heartbeatSeqBase(file, 7)).toBe(7000);
  });
});
