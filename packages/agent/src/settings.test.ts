import { describe, expect, it } from '@jest/globals';
import { Command } from 'commander';
import { addSettings, envOf, readSettings } from '@llmgw/shared';
import { RUN_SETTINGS, defaultStateDir, parseSize } from './settings.js';

/** `run`'s settings as the agent reads them from `argv` (no variables: Commander reads process.env, which the test leaves alone). */
function read(argv: string[]) {
  const cmd = addSettings(new Command('run').exitOverride(), RUN_SETTINGS);
  cmd.parse(argv, { from: 'user' });
  return readSettings(cmd, RUN_SETTINGS, {});
}

describe('the settings of llmgw-agent run', () => {
  it('keeps every flag and its variable (none for --source-header: a header may be a secret)', () => {
    const vars = Object.values(RUN_SETTINGS).flatMap((s) => ('env' in s && s.env === false ? [] : [envOf(s.flag)]));
    expect(vars).toEqual(
      'SERVER CA INSECURE_HTTP NODE_ID LABELS POOL FABRICS ADVERTISE_ADDR ENGINE_HOST NVIDIA_SMI PROC_ROOT SYS_ROOT STATE_DIR MODEL_CACHE MODEL_CACHE_MAX HEARTBEAT_INTERVAL PORT_RANGE VLLM_BIN VLLM_PYTHON SGLANG_PYTHON LLAMA_SERVER_BIN MAX_RESTARTS RESTART_BACKOFF LOG_LEVEL ALLOW_COMMAND_ENGINE ENGINE_USER STOP_ENGINES_ON_EXIT'
        .split(' ')
        .map((n) => `LLMGW_${n}`),
    );
  });

  it('gives the defaults with seconds in ms, and takes each --source-header whole', () => {
    expect(read([])).toMatchObject({
      server: 'https://127.0.0.1:8081',
      heartbeatIntervalMs: 5000,
      maxRestarts: 5,
      restartBackoffMs: 1000,
      portRange: '40000-40999',
      sourceHeader: [],
      stopEnginesOnExit: false,
    });
    const o = read(['--restart-backoff', '0.2', '--max-restarts', '0', '--source-header', 'a.invalid=Cookie: x=1, y=2', '--source-header', 'b.invalid=X: @/f']);
    expect(o).toMatchObject({ restartBackoffMs: 200, maxRestarts: 0, sourceHeader: ['a.invalid=Cookie: x=1, y=2', 'b.invalid=X: @/f'] });
  });

  it.each([
    [['--heartbeat-interval', 'often'], "--heartbeat-interval must be a number of seconds > 0, got 'often'"],
    [['--max-restarts', '-1'], "--max-restarts must be a whole number >= 0, got '-1'"],
    [['--restart-backoff', '0'], "--restart-backoff must be a number of seconds > 0, got '0'"],
  ])('refuses %j, naming the flag, the unit and the bound', (argv, message) => {
    expect(() => read(argv)).toThrow(message);
  });
});

describe('parseSize (--model-cache-max)', () => {
  it.each([
    ['50G', 50 * 1024 ** 3],
    ['50GB', 50 * 1024 ** 3],
    ['500m', 500 * 1024 ** 2],
    ['1.5T', 1.5 * 1024 ** 4],
    ['4096', 4096],
  ])('%s', (v, want) => expect(parseSize('--model-cache-max', v)).toBe(want));

  it.each(['', 'lots', '0', '-5G', '5X'])('refuses "%s"', (v) =>
    expect(() => parseSize('--model-cache-max', v)).toThrow(/invalid --model-cache-max .*want a size such as 50G/),
  );
});

describe('the default state directory', () => {
  it("is absolute whatever the working directory: /var/lib/llmgw-agent as root (the unit's StateDirectory=), else the XDG state directory", () => {
    expect(defaultStateDir({}, 0, '/root')).toBe('/var/lib/llmgw-agent');
    expect(defaultStateDir({ XDG_STATE_HOME: '/home/me/.state' }, 1000, '/home/me')).toBe('/home/me/.state/llmgw-agent');
    expect(defaultStateDir({}, 1000, '/home/me')).toBe('/home/me/.local/state/llmgw-agent');
    // A relative XDG_STATE_HOME is invalid by the spec, and would be the cwd again.
    expect(defaultStateDir({ XDG_STATE_HOME: 'state' }, 1000, '/home/me')).toBe('/home/me/.local/state/llmgw-agent');
    expect(read([]).stateDir).toBe(defaultStateDir());
    expect(read([]).stateDir.startsWith('/')).toBe(true);
  });
});
