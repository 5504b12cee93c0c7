import { describe, expect, it } from '@jest/globals';
import { refusedValues } from '@llmgw/engine-http';
import { HELP_TEXT, TEST_ENGINE_FLAGS, parseEngineArgs } from './options.js';

const base = ['--port', '0', '--model', 'tiny'];

describe('parseEngineArgs', () => {
  it('applies defaults', () => {
    expect(parseEngineArgs(base)).toEqual({
      kind: 'options',
      options: {
        host: '127.0.0.1',
        port: 0,
        model: 'tiny',
        apiKey: null,
        loadDelayMs: 0,
        loadMode: 'refuse',
        tokenDelayMs: 0,
        crashAfter: null,
        failStatus: null,
        exitImmediately: null,
        maxTokensDefault: 16,
        fault: null,
        faultBytes: 4194304,
        prefixCacheTokens: 65536,
        prefillTokensPerS: 0,
        cacheBlockTokens: 16,
        loras: [],
        maxLoras: 8,
        loraLoadMs: 0,
      },
    });
  });

  it('takes the key from LLMGW_ENGINE_API_KEY, where the agent puts it; --api-key wins for a person at a shell', () => {
    const env = { LLMGW_ENGINE_API_KEY: 'sk-env' };
    expect(parseEngineArgs(base, env)).toMatchObject({ kind: 'options', options: { apiKey: 'sk-env' } });
    expect(parseEngineArgs([...base, '--api-key', 'sk-flag'], env)).toMatchObject({ kind: 'options', options: { apiKey: 'sk-flag' } });
    expect(parseEngineArgs(base, { LLMGW_ENGINE_API_KEY: '' })).toMatchObject({ kind: 'options', options: { apiKey: null } });
  });

  it('reads every flag, in both --flag value and --flag=value forms', () => {
    const parsed = parseEngineArgs([
      ...base,
      '--host=0.0.0.0',
      '--api-key',
      'sk-1',
      '--load-delay-ms=250',
      '--load-mode',
      '503',
      '--token-delay-ms',
      '5',
      '--crash-after',
      '0',
      '--fail-status',
      '503',
      '--exit-immediately',
      '0',
      '--max-tokens-default',
      '4',
      '--prefix-cache-tokens',
      '0',
      '--prefill-tokens-per-s=20000',
      '--cache-block-tokens',
      '64',
      '--lora',
      'sql=/a/sql.gguf',
      '--max-loras=2',
      '--lora-load-ms',
      '20',
    ]);
    expect(parsed).toEqual({
      kind: 'options',
      options: {
        host: '0.0.0.0',
        port: 0,
        model: 'tiny',
        apiKey: 'sk-1',
        loadDelayMs: 250,
        loadMode: '503',
        tokenDelayMs: 5,
        crashAfter: 0,
        failStatus: 503,
        exitImmediately: 0,
        maxTokensDefault: 4,
        fault: null,
        faultBytes: 4194304,
        prefixCacheTokens: 0,
        prefillTokensPerS: 20000,
        cacheBlockTokens: 64,
        loras: [{ name: 'sql', path: '/a/sql.gguf' }],
        maxLoras: 2,
        loraLoadMs: 20,
      },
    });
  });

  it('returns help for --help and -h', () => {
    expect(parseEngineArgs(['--help'])).toEqual({ kind: 'help' });
    expect(parseEngineArgs([...base, '-h'])).toEqual({ kind: 'help' });
  });

  it.each([
    [['--model', 'tiny'], '--port is required'],
    [['--port', '0'], '--model is required'],
    [[...base, '--bogus', '1'], 'unknown flag --bogus'],
    [[...base, 'stray'], "unexpected argument 'stray'"],
    [[...base, '--crash-after'], '--crash-after needs a value'],
    [['--port', '-1', '--model', 'x'], "--port needs an integer, got '-1'"],
    [['--port', '70000', '--model', 'x'], '--port must be between 0 and 65535, got 70000'],
    [[...base, '--load-mode', 'lazy'], "--load-mode must be 'refuse' or '503', got 'lazy'"],
    [[...base, '--fail-status', '200'], '--fail-status must be between 400 and 599, got 200'],
    [[...base, '--max-tokens-default', '0'], '--max-tokens-default must be between 1 and 1000000, got 0'],
    [[...base, '--token-delay-ms', '1e3'], "--token-delay-ms needs an integer, got '1e3'"],
    [[...base, '--cache-block-tokens', '0'], '--cache-block-tokens must be between 1 and 1048576, got 0'],
    [[...base, '--prefill-tokens-per-s', '-5'], "--prefill-tokens-per-s needs an integer, got '-5'"],
    [[...base, '--lora', 'sql'], "--lora needs NAME=PATH, got 'sql'"],
    [[...base, '--lora', 'a=/a,=/b'], "--lora needs NAME=PATH, got '=/b'"],
    [[...base, '--lora', 'a=/a', '--lora', 'a=/b'], '--lora a is given twice'],
    [[...base, '--lora', 'tiny=/a'], "--lora tiny: the adapter's name is the served model's"],
    [[...base, '--max-loras', '0'], '--max-loras must be between 1 and 256, got 0'],
  ])('rejects %j', (argv, message) => {
    expect(parseEngineArgs(argv)).toEqual({ kind: 'error', message });
  });
});

describe('TEST_ENGINE_FLAGS', () => {
  const flags = Object.values(TEST_ENGINE_FLAGS);

  it.each(flags)('lists $flag in --help', (f) => {
    expect(HELP_TEXT).toContain(`\n  ${f.flag} ${f.placeholder} `);
  });

  it.each(flags.filter((f) => refusedValues(f).length > 0))('validates $flag, naming it', (f) => {
    for (const v of refusedValues(f)) {
      expect(parseEngineArgs([...base, f.flag, v])).toEqual({ kind: 'error', message: expect.stringMatching(new RegExp(`^${f.flag} `)) });
    }
  });
});
