import { afterAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { LAUNCH_MARK, boundLog, lastLogLines, lastRunLines, logPath, readTail, writeLaunchMark } from './logs.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-logs-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const log = pino({ level: 'silent' });

describe('log files', () => {
  it('a shard id cannot walk out of the logs directory', () => {
    expect(logPath('/s', 'a/../../etc')).toBe(path.join('/s', 'logs', 'a_.._.._etc.log'));
    expect(logPath('/s', '..x')).toBe(path.join('/s', 'logs', '_x.log'));
  });

  it('the launch mark masks the API key', () => {
    const file = logPath(dir, 'mark');
    writeLaunchMark(file, 'mark', 3, ['engine', '--api-key', 'sekrit', '--x=sekrit'], 'sekrit');
    const text = fs.readFileSync(file, 'utf8');
    expect(text).toContain(`${LAUNCH_MARK}`);
    expect(text).toContain('launch #3 of shard mark: engine --api-key *** --x=***');
    expect(text).not.toContain('sekrit');
  });

  it('the tail starts at a line and is empty for a missing file', () => {
    const file = path.join(dir, 'tail.log');
    fs.writeFileSync(file, 'first line\nsecond\nthird\n');
    expect(readTail(file, 12)).toBe('third\n');
    expect(readTail(file, 1000)).toBe('first line\nsecond\nthird\n');
    expect(readTail(path.join(dir, 'none.log'), 100)).toBe('');
  });

  it('a window of \\r redraws only starts after its first \\r, never mid-redraw', () => {
    const file = path.join(dir, 'redraws.log');
    fs.writeFileSync(file, 'start\nm.safetensors: 10%|\rm.safetensors: 20%|\rm.safetensors: 30%|');
    expect(readTail(file, 30)).toBe('m.safetensors: 30%|');
    expect(readTail(file, 50)).toBe('m.safetensors: 20%|\rm.safetensors: 30%|');
  });
});

describe('lastRunLines', () => {
  it('keeps the last 10 non-blank lines after the last launch mark, each cut short', () => {
    const before = `${LAUNCH_MARK}t launch #0\nold run\n`;
    const run = Array.from({ length: 12 }, (_, i) => `line ${i}`).join('\n\n');
    const text = `${before}${LAUNCH_MARK}t launch #1\n${run}\n${'y'.repeat(600)}\n`;
    const lines = lastRunLines(text).split('\n');
    expect(lines).toHaveLength(10);
    expect(lines[0]).toBe('line 3');
    expect(lines[9]).toBe(`${'y'.repeat(500)}…`);
    expect(lastRunLines(text)).not.toContain('old run');
  });

  it('takes everything without a mark, and reads the file', () => {
    expect(lastRunLines('a\nb\n')).toBe('a\nb');
    const file = path.join(dir, 'last.log');
    fs.writeFileSync(file, `${LAUNCH_MARK}x\nfatal\n`);
    expect(lastLogLines(file, undefined)).toBe('fatal');
  });

  it('masks the key before cutting lines short, so a key at the cut is not half shown', () => {
    const file = path.join(dir, 'key.log');
    const key = 'sk-llmgw-engine-abcdefghijklmnop';
    fs.writeFileSync(file, `${LAUNCH_MARK}x\n${'a'.repeat(490)}${key}\nkey=${key}\n`);
    const shown = lastLogLines(file, key);
    expect(shown).toContain('key=***');
    expect(shown).not.toContain('sk-llmgw-eng');
  });
});

describe('boundLog', () => {
  it('cuts a log past the bound to its last half, from a line start, with a note', async () => {
    const file = path.join(dir, 'big.log');
    const lines = Array.from({ length: 200 }, (_, i) => `line ${String(i).padStart(3, '0')}`).join('\n') + '\n';
    fs.writeFileSync(file, lines);
    await boundLog(file, 1000, log);
    const text = fs.readFileSync(file, 'utf8');
    expect(text.startsWith('--- llmgw-agent: earlier output dropped to keep this log under 1000 bytes\n')).toBe(true);
    expect(text.endsWith('line 199\n')).toBe(true);
    expect(text.length).toBeLessThan(1000);
    expect(text.split('\n')[1]).toMatch(/^line \d{3}$/);
  });

  it('leaves a small or missing log alone', async () => {
    const file = path.join(dir, 'small.log');
    fs.writeFileSync(file, 'small\n');
    await boundLog(file, 1000, log);
    expect(fs.readFileSync(file, 'utf8')).toBe('small\n');
    await expect(boundLog(path.join(dir, 'missing.log'), 10, log)).resolves.toBeUndefined();
  });
});
