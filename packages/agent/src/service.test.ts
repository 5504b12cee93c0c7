import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { engineUserCommands, installService, renderEnv, renderUnit } from './service.js';

const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

describe('systemd unit', () => {
  const unit = renderUnit({ node: process.execPath, main: '/opt/llmgw/agent/dist/main.js', envFile: '/etc/llmgw/agent.env', stateDir: '/var/lib/llmgw-agent' });

  it('keeps engines alive across agent restarts and restarts the agent always', () => {
    expect(unit).toMatch(/^Type=exec$/m);
    expect(unit).toMatch(/^Restart=always$/m);
    expect(unit).toMatch(/^KillMode=process$/m);
    expect(unit).toMatch(/^EnvironmentFile=\/etc\/llmgw\/agent\.env$/m);
    expect(unit).not.toMatch(/^MemoryMax=/m);
  });

  it('is hardened without taking away what a root agent needs: GPUs, /proc, /sys, user switching', () => {
    for (const line of [
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'StateDirectory=llmgw-agent',
      'StateDirectoryMode=0711',
      'UMask=0077',
      'ProtectHome=read-only',
      'PrivateTmp=yes',
      'ProtectKernelTunables=yes',
      'ProtectControlGroups=yes',
    ]) {
      expect(unit.split('\n')).toContain(line);
    }
    // Each of these would hide the GPUs or stop the switch to the engine user.
    for (const key of [
      'PrivateDevices',
      'DevicePolicy',
      'DeviceAllow',
      'ProtectClock',
      'User',
      'CapabilityBoundingSet',
      'PrivateUsers',
      'MemoryDenyWriteExecute',
    ]) {
      expect(unit).not.toMatch(new RegExp(`^${key}=`, 'm'));
    }
  });

  it('makes the engine user a system account without a login, its home under the state dir, in the GPU groups', () => {
    expect(engineUserCommands('llmgw', false, ['video', 'render'])).toEqual([
      ['useradd', '--system', '--user-group', '--home-dir', '/var/lib/llmgw-agent/engine', '--no-create-home', '--shell', '/usr/sbin/nologin', 'llmgw'],
      ['usermod', '--append', '--groups', 'video,render', 'llmgw'],
    ]);
    expect(engineUserCommands('llmgw', true, [])).toEqual([]);
  });

  // systemd-analyze exits 0 on unknown keys and bad values, so any output is a failure.
  (hasAnalyze ? it : it.skip)('passes systemd-analyze verify with no output', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-unit-'));
    const file = path.join(dir, 'llmgw-agent.service');
    fs.writeFileSync(file, unit);
    const r = spawnSync('systemd-analyze', ['verify', file], { encoding: 'utf8' });
    expect(`${r.stdout}${r.stderr}`).toBe('');
    expect(r.status).toBe(0);
    // The check itself must be able to fail: a misspelt key is reported.
    fs.writeFileSync(file, unit.replace('Restart=always', 'Restrat=always'));
    const bad = spawnSync('systemd-analyze', ['verify', file], { encoding: 'utf8' });
    expect(`${bad.stdout}${bad.stderr}`).toMatch(/Restrat/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes the unit and a root-only env file under a prefix', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-install-'));
    const r = installService({
      root,
      env: { LLMGW_SERVER: 'http://10.0.0.1:8081', LLMGW_JOIN_TOKEN: 'secret' },
      enable: false,
      node: process.execPath,
      main: '/opt/x/main.js',
    });
    expect(fs.readFileSync(r.envPath, 'utf8')).toBe(
      '# llmgw-agent settings; see `llmgw-agent run --help` for every variable.\nLLMGW_SERVER="http://10.0.0.1:8081"\nLLMGW_JOIN_TOKEN="secret"\n',
    );
    expect(fs.statSync(r.envPath).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(r.unitPath, 'utf8')).toContain(`ExecStart=${process.execPath} /opt/x/main.js run`);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('refuses values that would break the env file', () => {
    expect(() => renderEnv({ A: 'x"y' })).toThrow('invalid value for A');
  });
});
