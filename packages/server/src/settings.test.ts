import { describe, expect, it } from '@jest/globals';
import { Command } from 'commander';
import { envOf } from '@llmgw/shared';
import { SERVER_SETTINGS, addServerOptions, defaultTuning, readServerSettings, tuningOf } from './settings.js';

/** The settings as `llmgw-server` would read them from `argv`, with `env` as its environment. */
function read(argv: string[], env: Record<string, string> = {}) {
  const saved = { ...process.env };
  // Commander reads the variables from process.env itself, at parse time.
  Object.assign(process.env, env);
  try {
    const cmd = addServerOptions(new Command('llmgw-server').exitOverride());
    cmd.parse(argv, { from: 'user' });
    return readServerSettings(cmd, process.env);
  } finally {
    for (const k of Object.keys(env)) if (saved[k] === undefined) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

describe('the server settings table', () => {
  it('keeps every flag and its variable as the README documents them', () => {
    const flags = Object.values(SERVER_SETTINGS).map((s) => s.flag);
    expect(flags.map(envOf)).toEqual(
      'CLIENT_ADDR ADMIN_ADDR DATA_DIR DATABASE_URL INSTANCE_ID LEADER_LEASE CATALOG NOT_READY_AFTER LOST_AFTER ENGINE_PROBE_INTERVAL RECONCILE_INTERVAL FAILED_BACKOFF MAX_BODY_SIZE REPLY_BUFFER UPSTREAM_TIMEOUT COOLDOWN STREAM_IDLE_TIMEOUT PREFIX_CACHE_TOKENS SATURATION_WAIT QUEUE_TTL QUEUE_MAX KEEP_ALIVE DRAIN_PARALLEL MIN_HEALTHY DRAIN_TIMEOUT MAX_LOST_FRACTION COLD_START_TIMEOUT HEADERS_TIMEOUT REQUEST_TIMEOUT IDLE_TIMEOUT MAX_CONNECTIONS NODE_MAX_REQUESTS NODE_MAX_LONG_POLLS JOIN_RATE TLS_CERT TLS_KEY TLS_SAN INSECURE_HTTP CLIENT_TLS_CERT CLIENT_TLS_KEY JOIN_APPROVAL MODELS_DIR ALLOW_LOOPBACK_NODES BIND_CREDENTIALS LOG_LEVEL'
        .split(' ')
        .map((n) => `LLMGW_${n}`),
    );
  });

  it('gives the defaults, seconds already in ms', () => {
    const o = read([]);
    expect(o).toMatchObject({
      clientAddr: '127.0.0.1:8080',
      adminAddr: '127.0.0.1:8081',
      joinApproval: 'auto',
      logLevel: 'info',
      insecureHttp: false,
      tlsSan: [],
    });
    expect(o.databaseUrl).toBeUndefined();
    expect(tuningOf(o)).toEqual({
      leaderLeaseMs: 2000,
      notReadyAfterMs: 15_000,
      lostAfterMs: 300_000,
      engineProbeIntervalMs: 2000,
      reconcileIntervalMs: 5000,
      failedBackoffMs: 30_000,
      maxBodyBytes: 10 * 1024 * 1024,
      upstreamTimeoutMs: 600_000,
      cooldownMs: 5000,
      streamIdleTimeoutMs: 60_000,
      prefixCacheTokens: 500_000,
      saturationWaitMs: 25,
      queueTtlMs: 30_000,
      queueMax: 1000,
      keepAliveMs: 5000,
      drainParallel: 1,
      minHealthyMs: 3000,
      drainTimeoutMs: 60_000,
      maxLostFraction: 0.5,
      coldStartTimeoutMs: 300_000,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 65_000,
      maxConnections: 1024,
      replyBufferBytes: 256 * 1024 * 1024,
      nodeMaxRequests: 16,
      nodeMaxLongPolls: 2,
      joinRate: 60,
    });
    expect(defaultTuning()).toEqual(tuningOf(o));
  });

  it('converts given seconds to ms and leaves counts, bytes and fractions as they are', () => {
    const o = read(['--lost-after', '0.5', '--min-healthy=0', '--max-body-size', '2048', '--drain-parallel', '3', '--max-lost-fraction', '1'], {
      LLMGW_IDLE_TIMEOUT: '7',
    });
    expect(o).toMatchObject({ lostAfterMs: 500, minHealthyMs: 0, maxBodyBytes: 2048, drainParallel: 3, maxLostFraction: 1, keepAliveTimeoutMs: 7000 });
  });

  it.each([
    [['--lost-after', 'x'], "--lost-after must be a number of seconds > 0, got 'x'"],
    [['--lost-after', '0'], "--lost-after must be a number of seconds > 0, got '0'"],
    [['--min-healthy', '-1'], "--min-healthy must be a number of seconds >= 0, got '-1'"],
    [['--min-healthy', ''], "--min-healthy must be a number of seconds >= 0, got ''"],
    [['--max-body-size', '1.5'], "--max-body-size must be a whole number of bytes > 0, got '1.5'"],
    [['--drain-parallel', '0'], "--drain-parallel must be a whole number > 0, got '0'"],
    [['--prefix-cache-tokens', 'lots'], "--prefix-cache-tokens must be a whole number of tokens > 0, got 'lots'"],
    [['--max-lost-fraction', '1.5'], "--max-lost-fraction must be a fraction > 0 and <= 1, got '1.5'"],
    [['--cooldown', 'Infinity'], "--cooldown must be a number of seconds > 0, got 'Infinity'"],
    [['--reply-buffer', String(16 * 1024 * 1024)], `--reply-buffer must be a whole number of bytes >= ${64 * 1024 * 1024}, got '${16 * 1024 * 1024}'`],
  ])('refuses %j, naming the flag, the unit and the bound', (argv, message) => {
    expect(() => read(argv)).toThrow(message);
  });

  it('names the variable when the refused value came from it', () => {
    expect(() => read([], { LLMGW_MAX_CONNECTIONS: 'many' })).toThrow("LLMGW_MAX_CONNECTIONS must be a whole number > 0, got 'many'");
    expect(() => read(['--max-connections', '0'], { LLMGW_MAX_CONNECTIONS: 'many' })).toThrow("--max-connections must be a whole number > 0, got '0'");
  });

  it('reads --insecure-http strictly from its variable, as parseSwitch does', () => {
    expect(read([], { LLMGW_INSECURE_HTTP: '0' }).insecureHttp).toBe(false);
    expect(read([], { LLMGW_INSECURE_HTTP: 'on' }).insecureHttp).toBe(true);
    expect(read(['--insecure-http'], { LLMGW_INSECURE_HTTP: 'off' }).insecureHttp).toBe(true);
    expect(() => read([], { LLMGW_INSECURE_HTTP: 'maybe' })).toThrow('invalid LLMGW_INSECURE_HTTP="maybe"');
  });

  it('collects --tls-san from the flag, repeated or comma-separated, or from its variable', () => {
    expect(read(['--tls-san', 'a.example.invalid,b', '--tls-san', '10.0.0.1']).tlsSan).toEqual(['a.example.invalid', 'b', '10.0.0.1']);
    expect(read([], { LLMGW_TLS_SAN: 'a.example.invalid, b' }).tlsSan).toEqual(['a.example.invalid', 'b']);
  });
});
