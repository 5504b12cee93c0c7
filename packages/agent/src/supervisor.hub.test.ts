import { afterAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { ShardAssignment } from '@llmgw/shared';
import { Supervisor } from './supervisor/index.js';
import { downloadOf, newShard } from './supervisor/shard.js';
import { waitFor } from './testing.js';

const dirs: string[] = [];
const sups: Supervisor[] = [];
afterAll(async () => {
  for (const s of sups) await s.shutdown({ stopEngines: true });
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-suph-'));
  dirs.push(d);
  return d;
}

/**
 * A stand-in for `vllm serve`: it draws huggingface_hub's bar for one safetensors file on
 * stderr, redrawn with \r as tqdm does into a file, then waits for $VLLM_TEST_GO to exist;
 * then it serves /health and /v1/models (so the shard becomes ready) while its last
 * redraw stays at 45%, and the supervisor must stop reporting it.
 */
const FAKE_VLLM = `#!${process.execPath}
const http = require('node:http');
const fs = require('node:fs');
const args = process.argv.slice(2);
const flag = (n) => args[args.indexOf(n) + 1];
const bar = (p, n, r) => 'model-00001-of-00004.safetensors: ' + String(p).padStart(3) + '%|#####     | ' + n + '/4.97G [00:30<00:36, ' + r + ']';
process.stderr.write('INFO vLLM API server version 0.11.0\\n' + bar(0, '0.00', '?B/s') + '\\r' + bar(20, '1.00G', '70.1MB/s') + '\\r' + bar(45, '2.24G', '75.2MB/s'));
const wait = setInterval(() => {
  if (!fs.existsSync(process.env.VLLM_TEST_GO)) return;
  clearInterval(wait);
  http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(req.url === '/v1/models' ? JSON.stringify({ data: [{ id: flag('--served-model-name') }] }) : '{}');
  }).listen(Number(flag('--port')), flag('--host'));
}, 20);
`;

function vllmShard(go: string): ShardAssignment {
  return {
    id: 'h1',
    replica_id: 'rep-h1',
    model: 'qwen',
    profile: 'gpu',
    engine: 'vllm',
    source: 'Qwen/Qwen2.5-7B-Instruct',
    rank: 0,
    shards: 1,
    gpus: [],
    gpu_indices: [],
    args: [],
    env: { VLLM_TEST_GO: go },
  };
}

describe('Supervisor with an engine that fetches a hub id itself', () => {
  it('reports the download the engine log shows while it starts, and none once it is ready', async () => {
    const dir = tmp();
    const vllm = path.join(dir, 'fake-vllm');
    fs.writeFileSync(vllm, FAKE_VLLM, { mode: 0o755 });
    const go = path.join(dir, 'go');
    const lo = 30000 + Math.floor(Math.random() * 20000);
    const s = new Supervisor({
      stateDir: dir,
      portRange: [lo, lo + 100],
      bindHost: '127.0.0.1',
      bins: { vllm, sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc' },
      log: pino({ level: 'silent' }),
      healthIntervalMs: 50,
      backoffBaseMs: 20,
      maxRestarts: 3,
      stopGraceMs: 1000,
    });
    sups.push(s);
    s.converge([vllmShard(go)]);
    const st = await waitFor('the bar in the status', () => s.statuses().find((x) => x.download));
    expect(st.state).toBe('starting');
    expect(st.download).toEqual({ done_bytes: 2.24e9, total_bytes: 4.97e9, bytes_per_s: 75.2e6 });
    fs.writeFileSync(go, '');
    const ready = await waitFor('ready', () => s.statuses().find((x) => x.state === 'ready'));
    expect(ready.download).toBeUndefined();
  });
});

describe('downloadOf', () => {
  const running = { pid: 1, pgid: 1, startTime: 1 };
  const bar = 'model.safetensors:  45%|####5     | 2.24G/4.97G [00:30<00:36, 75.2MB/s]';
  const shard = (over: Partial<ShardAssignment>) => ({ ...newShard({ ...vllmShard('/x'), ...over }), proc: running });

  it('reads the log for vLLM and SGLang while they start, and for nothing else', () => {
    expect(downloadOf(shard({}), undefined, () => bar).download?.done_bytes).toBe(2.24e9);
    expect(downloadOf(shard({ engine: 'sglang' }), undefined, () => bar).download?.done_bytes).toBe(2.24e9);
    expect(downloadOf(shard({ engine: 'llama.cpp' }), undefined, () => bar)).toEqual({});
    expect(downloadOf({ ...shard({}), proc: undefined }, undefined, () => bar)).toEqual({});
    const failed = shard({});
    failed.life = { ...failed.life, state: 'failed' };
    expect(downloadOf(failed, undefined, () => bar)).toEqual({});
  });

  it('leaves a shard whose file llmgw fetches to that fetch: its log is not read', () => {
    let read = 0;
    const s = shard({ file: { url: 'http://files.example/m', sha256: 'ab'.repeat(32) } });
    expect(downloadOf(s, undefined, () => (read++, bar))).toEqual({});
    expect(read).toBe(0);
  });
});
