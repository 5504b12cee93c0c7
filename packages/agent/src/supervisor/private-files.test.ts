import { afterAll, afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { logPath, writeLaunchMark } from './logs.js';
import { openPrivateAppend, privateStateDir } from './private-files.js';
import { spawnEngine } from './spawn.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-private-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const mode = (p: string) => fs.statSync(p).mode & 0o777;

// The finding's repro: an agent started by hand under the usual umask 022 made its state
// directory 0755 and every engine log 0644, readable by every local user (vLLM logs prompts).
let umask = 0;
beforeEach(() => {
  umask = process.umask(0o022);
});
afterEach(() => {
  process.umask(umask);
});

describe('the agent’s files under umask 022', () => {
  it('the state directory is 0700, or 0711 when engines run as another user', () => {
    const own = path.join(dir, 'own');
    privateStateDir(own, false);
    expect(mode(own)).toBe(0o700);
    const other = path.join(dir, 'other');
    fs.mkdirSync(other, { mode: 0o755 });
    privateStateDir(other, true);
    expect(mode(other)).toBe(0o711);
  });

  it('an engine log is 0600 in a 0700 logs folder, a log left 0644 by an older agent included', () => {
    const file = logPath(dir, 'shard-a');
    writeLaunchMark(file, 'shard-a', 0, ['engine'], undefined);
    expect(mode(file)).toBe(0o600);
    expect(mode(path.dirname(file))).toBe(0o700);
    fs.chmodSync(file, 0o644);
    fs.chmodSync(path.dirname(file), 0o755);
    writeLaunchMark(file, 'shard-a', 1, ['engine'], undefined);
    expect(mode(file)).toBe(0o600);
    expect(mode(path.dirname(file))).toBe(0o700);
  });

  it('the descriptor an engine writes its log through opens the file 0600', async () => {
    const file = path.join(dir, 'spawned.log');
    fs.writeFileSync(file, '', { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    const exited = new Promise<string>((resolve, reject) => {
      spawnEngine([process.execPath, '-e', 'console.log("hello")'], {}, file, { onExit: resolve, onSpawnError: reject });
    });
    await exited;
    expect(fs.readFileSync(file, 'utf8')).toContain('hello');
    expect(mode(file)).toBe(0o600);
  });

  it('openPrivateAppend appends', () => {
    const file = path.join(dir, 'append.log');
    for (const text of ['a', 'b']) {
      const fd = openPrivateAppend(file);
      fs.writeSync(fd, text);
      fs.closeSync(fd);
    }
    expect(fs.readFileSync(file, 'utf8')).toBe('ab');
  });
});
