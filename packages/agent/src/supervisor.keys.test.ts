import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import type { ShardAssignment } from '@llmgw/shared';
import { Supervisor } from './supervisor/index.js';
import { shardAssignment, waitFor } from './testing.js';

/**
 * Issue 27, finding 7: every engine runs as the one engine user, so each could read every
 * other engine's key in `/proc/PID/environ`. llmgw's engines now get it on descriptor 3
 * from a 0400 file the agent unlinked, and close it once read.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.join(here, '..', '..', 'test-engine', 'dist', 'main.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-keys-'));
let sup: Supervisor;

beforeAll(() => {
  if (!fs.existsSync(ENGINE)) execFileSync('npx', ['tsup'], { cwd: path.join(here, '..', '..', 'test-engine'), stdio: 'ignore' });
  const lo = 30000 + Math.floor(Math.random() * 20000);
  sup = new Supervisor({
    stateDir: dir,
    portRange: [lo, lo + 200],
    bindHost: '127.0.0.1',
    bins: { vllm: 'vllm', sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc', programs: new Map([['llmgw-test-engine', ENGINE]]) },
    log: pino({ level: 'silent' }),
    healthIntervalMs: 100,
    allowCommandEngine: true,
  });
});

afterAll(async () => {
  await sup.shutdown({ stopEngines: true });
  fs.rmSync(dir, { recursive: true, force: true });
});

const shard = (id: string): ShardAssignment =>
  shardAssignment(id, {
    replica_id: `rep-${id}`,
    model: `model-${id}`,
    engine: 'command',
    source: '/dev/null',
    api_key: `key-${id}-0123456789`,
    command: ['llmgw-test-engine', '--port', '{port}', '--model', '{model}', '--host', '{host}'],
  });

describe('an engine key on descriptor 3', () => {
  it('is in no engine’s environment, command line, open descriptors or key folder, and the engine requires it', async () => {
    sup.converge([shard('a'), shard('b')]);
    const ready = await waitFor('both ready', () => {
      const st = sup.statuses();
      return st.length === 2 && st.every((s) => s.state === 'ready') ? st : undefined;
    });
    for (const st of ready) {
      const environ = fs.readFileSync(`/proc/${st.pid}/environ`, 'utf8');
      const cmdline = fs.readFileSync(`/proc/${st.pid}/cmdline`, 'utf8');
      for (const id of ['a', 'b']) {
        expect(environ).not.toContain(`key-${id}-`);
        expect(cmdline).not.toContain(`key-${id}-`);
      }
      expect(cmdline.split('\0')).toEqual(expect.arrayContaining(['--api-key-file', '/dev/fd/3']));
      // Read and closed: no descriptor of the engine leads to a key file (through /proc/PID/fd/N).
      const links = fs.readdirSync(`/proc/${st.pid}/fd`).map((fd) => {
        try {
          return fs.readlinkSync(`/proc/${st.pid}/fd/${fd}`);
        } catch {
          return '';
        }
      });
      expect(links.filter((l) => l.includes(`${path.sep}keys${path.sep}`))).toEqual([]);
      const url = `http://127.0.0.1:${st.port}/v1/models`;
      expect((await fetch(url)).status).toBe(401);
      expect((await fetch(url, { headers: { authorization: `Bearer key-${st.id}-0123456789` } })).status).toBe(200);
    }
    // Unlinked once opened; the folder is the agent's alone.
    expect(fs.readdirSync(path.join(dir, 'keys'))).toEqual([]);
    expect(fs.statSync(path.join(dir, 'keys')).mode & 0o777).toBe(0o700);
  });
});
