import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import type { ShardAssignment } from '@llmgw/shared';
import { adapterArgs, peftRank } from './adapters.js';
import { buildCommand } from './engines.js';

function shard(over: Partial<ShardAssignment> = {}): ShardAssignment {
  return {
    id: 'r1-0',
    replica_id: 'r1',
    model: 'base',
    profile: 'p',
    engine: 'vllm',
    source: '/models/base',
    rank: 0,
    shards: 1,
    gpus: ['GPU-a'],
    gpu_indices: [0],
    args: [],
    env: {},
    adapters: [
      { name: 'sql-lora', source: '/models/sql' },
      { name: 'chat-lora', source: '/models/chat' },
      { name: 'law-lora', source: '/models/law' },
    ],
    max_loaded_adapters: 2,
    ...over,
  };
}
const ctx = {
  host: '127.0.0.1',
  port: 40001,
  bins: { vllm: 'vllm', sglangPython: 'python3', llamaServer: 'llama-server', nodeLlamaCpp: 'nlc', programs: new Map([['llmgw-test-engine', '/opt/te.js']]) },
  allowCommandEngine: true,
};

describe('LoRA adapters on the command line', () => {
  it('vLLM: every adapter by name, the loaded ones bounded, the rank from the largest adapter', () => {
    const rank = (s: string) => (s === '/models/law' ? 40 : 8);
    expect(adapterArgs('vllm', shard(), rank)).toEqual([
      '--enable-lora',
      '--max-loras',
      '2',
      '--max-cpu-loras',
      '3',
      '--max-lora-rank',
      '64',
      '--lora-modules',
      'sql-lora=/models/sql',
      'chat-lora=/models/chat',
      'law-lora=/models/law',
    ]);
    // Unknown ranks: vLLM's default, 16.
    expect(adapterArgs('vllm', shard(), () => undefined)).toContain('16');
    expect(buildCommand(shard(), ctx).argv).toContain('--enable-lora');
  });

  it('SGLang, llama-server and the built-in engine get their own flags; none without adapters', () => {
    expect(adapterArgs('sglang', shard())).toEqual([
      '--enable-lora',
      '--max-loras-per-batch',
      '2',
      '--lora-paths',
      'sql-lora=/models/sql',
      'chat-lora=/models/chat',
      'law-lora=/models/law',
    ]);
    expect(adapterArgs('llama.cpp', shard())).toEqual([
      '--lora-init-without-apply',
      '--lora',
      '/models/sql',
      '--lora',
      '/models/chat',
      '--lora',
      '/models/law',
    ]);
    expect(adapterArgs('node-llama-cpp', shard())).toEqual([
      '--max-loras',
      '2',
      '--lora',
      'sql-lora=/models/sql',
      '--lora',
      'chat-lora=/models/chat',
      '--lora',
      'law-lora=/models/law',
    ]);
    expect(adapterArgs('vllm', shard({ adapters: [] }))).toEqual([]);
    expect(buildCommand(shard({ adapters: undefined }), ctx).argv).not.toContain('--enable-lora');
  });

  it('a command template gets them as {adapters}', () => {
    const a = shard({ engine: 'command', command: ['llmgw-test-engine', '--port', '{port}', '--lora', '{adapters}', '--max-loras', '{max_loaded_adapters}'] });
    expect(buildCommand(a, ctx).argv.slice(-4)).toEqual(['--lora', 'sql-lora=/models/sql,chat-lora=/models/chat,law-lora=/models/law', '--max-loras', '2']);
    expect(buildCommand(shard({ ...a, max_loaded_adapters: undefined }), ctx).argv.slice(-1)).toEqual(['3']);
  });

  it('reads a PEFT folder rank from adapter_config.json, and nothing from anything else', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-peft-'));
    try {
      fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify({ r: 32, lora_alpha: 16 }));
      expect(peftRank(dir)).toBe(32);
      fs.writeFileSync(path.join(dir, 'adapter_config.json'), '{"r": "big"}');
      expect(peftRank(dir)).toBeUndefined();
      expect(peftRank(path.join(dir, 'nosuch'))).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
