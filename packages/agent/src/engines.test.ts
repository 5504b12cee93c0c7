import { describe, it, expect } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ShardAssignment } from '@llmgw/shared';
import { buildCommand, engineEnv, SGLANG_LAUNCHER, VLLM_LAUNCHER, type EngineBins } from './engines.js';
import { openKeyFile } from './supervisor/spawn.js';

const bins: EngineBins = {
  vllm: '/opt/vllm/bin/vllm',
  sglangPython: '/opt/sg/bin/python3',
  llamaServer: '/usr/bin/llama-server',
  nodeLlamaCpp: '/opt/llmgw/nlc.js',
};
const ctx = {
  host: '0.0.0.0',
  port: 40001,
  bins: { ...bins, programs: new Map([['llmgw-test-engine', '/opt/llmgw/test-engine.js']]) },
  allowCommandEngine: true,
};
const GPUS = ['GPU-aaaa', 'GPU-bbbb'];

function shard(over: Partial<ShardAssignment> = {}): ShardAssignment {
  return {
    id: 'r1-0',
    replica_id: 'r1',
    model: 'llama-8b',
    profile: 'h100',
    engine: 'vllm',
    source: 'meta-llama/Llama-3.1-8B-Instruct',
    rank: 0,
    shards: 1,
    gpus: GPUS,
    gpu_indices: [0, 1],
    args: [],
    env: {},
    api_key: 'sk-rep',
    ...over,
  };
}

const twoNodes = { shards: 2, master_addr: '10.0.0.1', master_port: 29500 };

describe('vllm', () => {
  it('serves a single-node shard with TP = its GPUs and the profile args last', () => {
    const cmd = buildCommand(shard({ args: ['--max-model-len', '8192'] }), ctx);
    expect(cmd.argv).toEqual([
      '/opt/vllm/bin/vllm',
      'serve',
      'meta-llama/Llama-3.1-8B-Instruct',
      '--served-model-name',
      'llama-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '40001',
      '--tensor-parallel-size',
      '2',
      '--max-model-len',
      '8192',
    ]);
    expect(cmd.env.VLLM_API_KEY).toBe('sk-rep');
    expect(cmd.http).toBe(true);
  });

  it('uses TP 1 for a CPU shard and sets no key variable when there is none', () => {
    const cmd = buildCommand(shard({ gpus: [], gpu_indices: [], api_key: undefined }), ctx);
    expect(cmd.argv).toContain('--tensor-parallel-size');
    expect(cmd.argv[cmd.argv.indexOf('--tensor-parallel-size') + 1]).toBe('1');
    expect(cmd.env).not.toHaveProperty('VLLM_API_KEY');
  });

  it('multi-node rank 0 serves HTTP with PP = nodes and the mp rendezvous flags', () => {
    const cmd = buildCommand(shard(twoNodes), ctx);
    expect(cmd.argv.slice(11)).toEqual([
      '--pipeline-parallel-size',
      '2',
      '--nnodes',
      '2',
      '--node-rank',
      '0',
      '--master-addr',
      '10.0.0.1',
      '--master-port',
      '29500',
    ]);
    expect(cmd.argv).not.toContain('--headless');
    expect(cmd.http).toBe(true);
  });

  it('multi-node rank 1 runs the same command headless, pointed at rank 0', () => {
    const cmd = buildCommand(shard({ ...twoNodes, id: 'r1-1', rank: 1 }), ctx);
    expect(cmd.argv.slice(11)).toEqual([
      '--pipeline-parallel-size',
      '2',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--master-addr',
      '10.0.0.1',
      '--master-port',
      '29500',
      '--headless',
    ]);
    expect(cmd.http).toBe(false);
  });

  it('refuses a multi-node shard without a rendezvous address', () => {
    expect(() => buildCommand(shard({ shards: 2, rank: 1 }), ctx)).toThrow(/master_addr/);
  });
});

describe('sglang', () => {
  it('single node', () => {
    const cmd = buildCommand(shard({ engine: 'sglang' }), ctx);
    expect(cmd.argv).toEqual([
      '/opt/sg/bin/python3',
      '-c',
      SGLANG_LAUNCHER,
      '--model-path',
      'meta-llama/Llama-3.1-8B-Instruct',
      '--served-model-name',
      'llama-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '40001',
      '--tp-size',
      '2',
    ]);
    // On descriptor 3 (issue 27, finding 7): not in the environment, where every engine of the user reads it.
    expect(Object.values(cmd.env)).not.toContain('sk-rep');
    expect(cmd.keyOnFd).toBe(true);
    expect(cmd.http).toBe(true);
  });

  it('multi-node: total TP on every node, dist-init-addr of rank 0, followers without HTTP', () => {
    const lead = buildCommand(shard({ engine: 'sglang', ...twoNodes }), ctx);
    const follower = buildCommand(shard({ engine: 'sglang', ...twoNodes, rank: 1 }), ctx);
    expect(lead.argv.slice(11)).toEqual(['--tp-size', '4', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', '10.0.0.1:29500']);
    expect(follower.argv.slice(11)).toEqual(['--tp-size', '4', '--nnodes', '2', '--node-rank', '1', '--dist-init-addr', '10.0.0.1:29500']);
    expect(lead.http).toBe(true);
    expect(follower.http).toBe(false);
  });
});

describe('llama.cpp', () => {
  it('offloads all layers when the shard has GPUs', () => {
    const cmd = buildCommand(shard({ engine: 'llama.cpp', source: '/models/q4.gguf', args: ['-c', '4096'] }), ctx);
    expect(cmd.argv).toEqual([
      '/usr/bin/llama-server',
      '-m',
      '/models/q4.gguf',
      '--alias',
      'llama-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '40001',
      '-ngl',
      '999',
      '-c',
      '4096',
    ]);
    expect(cmd.env.LLAMA_API_KEY).toBe('sk-rep');
  });

  it('does not offload on a CPU shard', () => {
    expect(buildCommand(shard({ engine: 'llama.cpp', gpus: [] }), ctx).argv).not.toContain('-ngl');
  });

  it('refuses multi-node with a clear error', () => {
    expect(() => buildCommand(shard({ engine: 'llama.cpp', ...twoNodes }), ctx)).toThrow(/llama\.cpp cannot run a model across nodes/);
  });
});

describe('node-llama-cpp', () => {
  it('runs a .js engine with this Node', () => {
    const cmd = buildCommand(shard({ engine: 'node-llama-cpp', gpus: [], source: '/m.gguf' }), ctx);
    expect(cmd.argv).toEqual([
      process.execPath,
      '/opt/llmgw/nlc.js',
      '--model',
      '/m.gguf',
      '--served-name',
      'llama-8b',
      '--host',
      '0.0.0.0',
      '--port',
      '40001',
      '--api-key-file',
      '/dev/fd/3',
    ]);
    expect(Object.values(cmd.env)).not.toContain('sk-rep');
    expect(cmd.keyOnFd).toBe(true);
    // No key, no descriptor.
    const keyless = buildCommand(shard({ engine: 'node-llama-cpp', gpus: [], source: '/m.gguf', api_key: undefined }), ctx);
    expect(keyless.argv).not.toContain('--api-key-file');
    expect(keyless.keyOnFd).toBeUndefined();
  });

  it('runs any other bin directly', () => {
    const cmd = buildCommand(shard({ engine: 'node-llama-cpp', gpus: [] }), { ...ctx, bins: { ...bins, nodeLlamaCpp: 'nlc' } });
    expect(cmd.argv[0]).toBe('nlc');
  });
});

describe('command', () => {
  const template = [
    'my-engine',
    '--listen',
    '{host}:{port}',
    '--name',
    '{model}',
    '--weights={source}',
    '--key',
    '{api_key}',
    '--gpus',
    '{gpus}',
    '--rank',
    '{rank}/{shards}',
    '--peer',
    '{master_addr}:{master_port}',
    '{unknown}',
  ];

  it('substitutes every placeholder inside elements, then appends args; the key goes by environment only', () => {
    const cmd = buildCommand(shard({ engine: 'command', command: template, args: ['--x'], ...twoNodes, rank: 1 }), ctx);
    expect(cmd.argv).toEqual([
      'my-engine',
      '--listen',
      '0.0.0.0:40001',
      '--name',
      'llama-8b',
      '--weights=meta-llama/Llama-3.1-8B-Instruct',
      '--gpus',
      'GPU-aaaa,GPU-bbbb',
      '--rank',
      '1/2',
      '--peer',
      '10.0.0.1:29500',
      '{unknown}',
      '--x',
    ]);
    expect(cmd.env.LLMGW_ENGINE_API_KEY).toBe('sk-rep');
    expect(cmd.http).toBe(false);
  });

  it('never puts the key on the command line, whatever the template or the engine', () => {
    const withKey = ['e', '--api-key', '{api_key}', '--key={api_key}', 'x{api_key}y', '--port', '{port}'];
    expect(buildCommand(shard({ engine: 'command', command: withKey }), ctx).argv).toEqual(['e', '--port', '40001']);
    for (const engine of ['vllm', 'sglang', 'llama.cpp', 'node-llama-cpp', 'command']) {
      const cmd = buildCommand(shard({ engine, gpus: [], command: ['e', '--key', '{api_key}'] }), ctx);
      expect(cmd.argv.join(' ')).not.toContain('sk-rep');
      // Either on descriptor 3 or, for engines that read no descriptor, in the environment.
      expect([engine, cmd.keyOnFd === true || Object.values(cmd.env).includes('sk-rep')]).toEqual([engine, true]);
      expect([engine, cmd.keyOnFd === true && Object.values(cmd.env).includes('sk-rep')]).toEqual([engine, false]);
    }
  });

  it('refuses a profile env that loads code unless the node runs command engines anyway (issue 27: NODE_OPTIONS ran JavaScript)', () => {
    const strict = { ...ctx, allowCommandEngine: false };
    expect(() => buildCommand(shard({ engine: 'node-llama-cpp', env: { NODE_OPTIONS: '--import=data:text/javascript,process.exit(7)' } }), strict)).toThrow(
      'profile env NODE_OPTIONS loads code into the engine (as NODE_OPTIONS does), which only engine: command may do, on nodes started with --allow-command-engine',
    );
    expect(() => buildCommand(shard({ engine: 'vllm', env: { LD_PRELOAD: '/var/lib/llmgw/files/x' } }), strict)).toThrow(/LD_PRELOAD loads code/);
    expect(buildCommand(shard({ engine: 'vllm', env: { VLLM_LOGGING_LEVEL: 'DEBUG', HF_HOME: '/c' } }), strict).env).toMatchObject({
      VLLM_LOGGING_LEVEL: 'DEBUG',
      HF_HOME: '/c',
    });
    expect(buildCommand(shard({ engine: 'node-llama-cpp', env: { NODE_OPTIONS: '--x' } }), ctx).env.NODE_OPTIONS).toBe('--x');
  });

  it('the profile env cannot replace the key', () => {
    expect(buildCommand(shard({ engine: 'command', command: ['e'], env: { LLMGW_ENGINE_API_KEY: 'mine' } }), ctx).env.LLMGW_ENGINE_API_KEY).toBe('sk-rep');
  });

  it('drops `--key {api_key}` when the shard has no key', () => {
    const cmd = buildCommand(shard({ engine: 'command', command: ['e', '--key', '{api_key}', '--port', '{port}'], api_key: undefined }), ctx);
    expect(cmd.argv).toEqual(['e', '--port', '40001']);
  });

  it('resolves llmgw-test-engine to the built test engine run by this Node', () => {
    const cmd = buildCommand(shard({ engine: 'command', command: ['llmgw-test-engine', '--port', '{port}'] }), ctx);
    // llmgw's own program reads the key from descriptor 3; any other command from the environment.
    expect(cmd.argv).toEqual([process.execPath, '/opt/llmgw/test-engine.js', '--port', '40001', '--api-key-file', '/dev/fd/3']);
    expect(cmd.keyOnFd).toBe(true);
    const noBin = buildCommand(shard({ engine: 'command', command: ['llmgw-test-engine'] }), { ...ctx, bins });
    expect(noBin.argv).toEqual(['llmgw-test-engine']);
  });

  it('is refused on an agent started without --allow-command-engine, saying how to allow it', () => {
    const a = shard({ engine: 'command', command: ['my-engine', '--port', '{port}'] });
    expect(() => buildCommand(a, { ...ctx, allowCommandEngine: false })).toThrow(
      'this agent does not allow engine: command (start it with --allow-command-engine, or LLMGW_ALLOW_COMMAND_ENGINE=1)',
    );
    expect(() => buildCommand(a, { host: ctx.host, port: ctx.port, bins })).toThrow(/--allow-command-engine/);
  });

  it('needs a template', () => {
    expect(() => buildCommand(shard({ engine: 'command' }), ctx)).toThrow(/command template/);
  });
});

describe('env', () => {
  it('pins GPUs by UUID in PCI order, over whatever the profile set', () => {
    expect(engineEnv(shard({ env: { HF_HOME: '/cache', CUDA_VISIBLE_DEVICES: '0' } }))).toEqual({
      HF_HOME: '/cache',
      CUDA_VISIBLE_DEVICES: 'GPU-aaaa,GPU-bbbb',
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    });
  });

  it('hides all GPUs from a CPU shard', () => {
    expect(engineEnv(shard({ gpus: [], env: { A: 'b' } }))).toEqual({ A: 'b', CUDA_VISIBLE_DEVICES: '' });
  });

  it('is part of every command', () => {
    expect(buildCommand(shard({ engine: 'sglang' }), ctx).env.CUDA_VISIBLE_DEVICES).toBe('GPU-aaaa,GPU-bbbb');
  });
});

describe('unknown engine', () => {
  it('throws naming the engine', () => {
    expect(() => buildCommand(shard({ engine: 'ollama' }), ctx)).toThrow(/unknown engine "ollama"/);
  });
});

describe('SGLANG_LAUNCHER', () => {
  const python = spawnSync('python3', ['--version']).status === 0;
  (python ? it : it.skip)('hands SGLang the key from descriptor 3 in memory, on no command line and in no environment', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sglang-'));
    fs.mkdirSync(path.join(dir, 'sglang'));
    fs.writeFileSync(path.join(dir, 'sglang', '__init__.py'), '');
    // Stands in for sglang.launch_server: prints what its argument parser would see.
    fs.writeFileSync(
      path.join(dir, 'sglang', 'launch_server.py'),
      "import os, sys\nif __name__ == '__main__':\n    print(repr(sys.argv[1:]), os.environ.get('LLMGW_ENGINE_API_KEY'))\n    print(open('/proc/self/cmdline').read())\n",
    );
    const cmd = buildCommand(shard({ engine: 'sglang', gpus: [] }), { ...ctx, bins: { ...bins, sglangPython: 'python3' } });
    const [bin = '', ...args] = cmd.argv;
    expect(cmd.keyOnFd).toBe(true);
    const keyFd = openKeyFile({ dir: path.join(dir, 'keys'), secret: 'sk-rep' });
    // The file is gone once opened: the descriptor is the only way to it.
    expect(fs.readdirSync(path.join(dir, 'keys'))).toEqual([]);
    const r = spawnSync(bin, args, { env: { ...process.env, ...cmd.env, PYTHONPATH: dir }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', keyFd] });
    fs.closeSync(keyFd);
    const [seen, cmdline] = r.stdout.split('\n');
    expect(seen).toBe(
      "['--model-path', 'meta-llama/Llama-3.1-8B-Instruct', '--served-model-name', 'llama-8b', '--host', '0.0.0.0', '--port', '40001', '--tp-size', '1', '--api-key', 'sk-rep'] None",
    );
    expect(cmdline).not.toContain('sk-rep');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('VLLM_LAUNCHER (--vllm-python)', () => {
  const python = spawnSync('python3', ['--version']).status === 0;
  (python ? it : it.skip)('hands vLLM the key from descriptor 3 in memory, in no environment or command line', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vllm-'));
    fs.mkdirSync(path.join(dir, 'vllm', 'entrypoints', 'cli'), { recursive: true });
    for (const d of ['vllm', 'vllm/entrypoints', 'vllm/entrypoints/cli']) fs.writeFileSync(path.join(dir, d, '__init__.py'), '');
    // Stands in for the `vllm` console script's entry point.
    fs.writeFileSync(
      path.join(dir, 'vllm', 'entrypoints', 'cli', 'main.py'),
      "import os, sys\ndef main():\n    print(repr(sys.argv), os.environ.get('VLLM_API_KEY'))\n    print(open('/proc/self/cmdline').read())\n    return 0\n",
    );
    const cmd = buildCommand(shard({ engine: 'vllm', gpus: [] }), { ...ctx, bins: { ...bins, vllmPython: 'python3' } });
    expect(cmd.argv.slice(0, 4)).toEqual(['python3', '-c', VLLM_LAUNCHER, 'serve']);
    expect(cmd.keyOnFd).toBe(true);
    expect(Object.values(cmd.env)).not.toContain('sk-rep');
    const keyFd = openKeyFile({ dir: path.join(dir, 'keys'), secret: 'sk-rep' });
    const [bin = '', ...args] = cmd.argv;
    const r = spawnSync(bin, args, { env: { ...process.env, ...cmd.env, PYTHONPATH: dir }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', keyFd] });
    fs.closeSync(keyFd);
    const [seen, cmdline] = r.stdout.split('\n');
    expect(seen).toBe(
      "['vllm', 'serve', 'meta-llama/Llama-3.1-8B-Instruct', '--served-model-name', 'llama-8b', '--host', '0.0.0.0', '--port', '40001', '--tensor-parallel-size', '1', '--api-key', 'sk-rep'] None",
    );
    expect(cmdline).not.toContain('sk-rep');
    // Without --vllm-python: vllm itself, the key in VLLM_API_KEY (what remains).
    const plain = buildCommand(shard({ engine: 'vllm', gpus: [] }), ctx);
    expect(plain.argv[0]).toBe(bins.vllm);
    expect(plain.env.VLLM_API_KEY).toBe('sk-rep');
    expect(plain.keyOnFd).toBeUndefined();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
