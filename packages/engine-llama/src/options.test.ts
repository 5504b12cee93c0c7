import { describe, expect, it } from '@jest/globals';
import { refusedValues } from '@llmgw/engine-http';
import { DEFAULT_MAX_LORAS, DEFAULT_PARALLEL, HELP_TEXT, LLAMA_ENGINE_FLAGS, parseEngineArgs, sizingFromArgs } from './options.js';

describe('parseEngineArgs', () => {
  it('takes the key from LLMGW_ENGINE_API_KEY when --api-key is not given', () => {
    const argv = ['--model', '/m.gguf', '--port', '1'];
    expect(parseEngineArgs(argv, { LLMGW_ENGINE_API_KEY: 'sk-env' })).toMatchObject({ kind: 'options', options: { apiKey: 'sk-env' } });
    expect(parseEngineArgs([...argv, '--api-key', 'k'], { LLMGW_ENGINE_API_KEY: 'sk-env' })).toMatchObject({ kind: 'options', options: { apiKey: 'k' } });
    expect(parseEngineArgs(argv, {})).toMatchObject({ kind: 'options', options: { apiKey: null } });
  });

  it('takes the agent argv with defaults for the rest', () => {
    const r = parseEngineArgs(['--model', '/m.gguf', '--served-name', 'tiny', '--host', '0.0.0.0', '--port', '40001', '--api-key', 'k']);
    expect(r).toEqual({
      kind: 'options',
      options: {
        model: '/m.gguf',
        servedName: 'tiny',
        host: '0.0.0.0',
        port: 40001,
        apiKey: 'k',
        threads: null,
        parallel: DEFAULT_PARALLEL,
        contextSize: null,
        adapters: [],
        maxLoras: DEFAULT_MAX_LORAS,
      },
    });
  });

  it('takes every --lora NAME=PATH in order, with --max-loras', () => {
    const argv = ['--model', 'm.gguf', '--port', '0', '--max-loras', '2', '--lora', 'sql=/a/sql.gguf', '--lora=chat=/b/c=d.gguf'];
    expect(parseEngineArgs(argv)).toMatchObject({
      kind: 'options',
      options: {
        maxLoras: 2,
        adapters: [
          { name: 'sql', path: '/a/sql.gguf' },
          { name: 'chat', path: '/b/c=d.gguf' },
        ],
      },
    });
  });

  it.each([
    [['--lora', 'sql'], "--lora must be NAME=PATH, got 'sql'"],
    [['--lora', '=/a.gguf'], "--lora must be NAME=PATH, got '=/a.gguf'"],
    [['--lora', 'sql='], "--lora must be NAME=PATH, got 'sql='"],
    [['--lora', 'sql=/a', '--lora', 'sql=/b'], '--lora names sql twice'],
    [['--served-name', 'tiny', '--lora', 'tiny=/a'], '--lora tiny is the served name: name the adapter apart from its base'],
  ])('refuses the adapters %j', (extra, message) => {
    expect(parseEngineArgs(['--model', 'm.gguf', '--port', '0', ...extra])).toEqual({ kind: 'error', message });
  });

  it('lets a later flag (profile args) override an earlier one, in both spellings', () => {
    const r = parseEngineArgs(['--model', 'a.gguf', '--port', '0', '--threads', '4', '--parallel=3', '--threads=1', '--context-size', '2048']);
    expect(r).toMatchObject({ kind: 'options', options: { threads: 1, parallel: 3, contextSize: 2048, port: 0 } });
  });

  it('explains what is wrong', () => {
    expect(parseEngineArgs(['--port', '1'])).toEqual({ kind: 'error', message: '--model is required' });
    expect(parseEngineArgs(['--model', 'm'])).toEqual({ kind: 'error', message: '--port is required' });
    expect(parseEngineArgs(['--model', 'm', '--port', '1', '--threads', '0'])).toEqual({
      kind: 'error',
      message: '--threads must be between 1 and 1024, got 0',
    });
    expect(parseEngineArgs(['--model', 'm', '--port', '1e3'])).toEqual({ kind: 'error', message: "--port needs an integer, got '1e3'" });
    expect(parseEngineArgs(['--model', 'm', '--port', '1', '--gpu-layers', '3'])).toEqual({ kind: 'error', message: 'unknown flag --gpu-layers' });
    expect(parseEngineArgs(['--model'])).toEqual({ kind: 'error', message: '--model needs a value' });
    expect(parseEngineArgs(['--help'])).toEqual({ kind: 'help' });
  });
});

describe('sizingFromArgs', () => {
  it('picks the sizing flags out of profile args', () => {
    expect(sizingFromArgs(['--context-size', '4096', '--threads', '2', '--parallel=4', '--context-size=8192'])).toEqual({ contextSize: 8192, parallel: 4 });
    expect(sizingFromArgs(['--parallel', 'lots', '--context-size'])).toEqual({});
    expect(sizingFromArgs([])).toEqual({});
  });
});

describe('LLAMA_ENGINE_FLAGS', () => {
  const flags = Object.values(LLAMA_ENGINE_FLAGS);

  it.each(flags)('lists $flag in --help', (f) => {
    expect(HELP_TEXT).toContain(`\n  ${f.flag} ${f.placeholder} `);
  });

  it.each(flags.filter((f) => refusedValues(f).length > 0))('validates $flag, naming it', (f) => {
    for (const v of refusedValues(f)) {
      expect(parseEngineArgs(['--model', 'm.gguf', '--port', '0', f.flag, v])).toEqual({
        kind: 'error',
        message: expect.stringMatching(new RegExp(`^${f.flag} `)),
      });
    }
  });
});
