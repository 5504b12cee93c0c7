import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { writePrivateFile } from '@llmgw/shared';
import { DEFAULT_ENGINE_USER } from './engine-user.js';

export interface ServiceOptions {
  /** Absolute path of the node binary and of the agent's built main.js. */
  node: string;
  main: string;
  envFile: string;
  /** Must be `/var/lib/<StateDirectory=>`: systemd creates it and keeps it writable. */
  stateDir: string;
}

/** Where install-service keeps the agent's state; the engine user's home is below it. */
export const STATE_DIR = '/var/lib/llmgw-agent';
/** The engine user's home: the one place under ProtectSystem=strict where engines write caches. */
export const ENGINE_HOME = `${STATE_DIR}/engine`;
/** Groups that own GPU device nodes on common distributions (/dev/nvidia*, /dev/dri/renderD*). */
export const GPU_GROUPS = ['video', 'render'];

/**
 * The agent's systemd unit.
 *
 * KillMode=process: on stop or restart systemd signals only the agent, not the engines
 * in its cgroup. That is what lets an upgrade leave models serving; the new agent
 * re-adopts the engines from its state file (matching pid and start time) and stops
 * any the server no longer assigns. TimeoutStopSec covers the agent's own shutdown,
 * which does not wait for engines.
 */
export function renderUnit(o: ServiceOptions): string {
  return `[Unit]
Description=llmgw agent: reports this machine and runs the engines assigned to it
Documentation=https://github.com/llmgw/llmgw#joining-a-machine
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
EnvironmentFile=${o.envFile}
Environment=LLMGW_STATE_DIR=${o.stateDir}
ExecStart=${o.node} ${o.main} run
Restart=always
RestartSec=5
KillMode=process
TimeoutStopSec=30
# Engines inherit these: vLLM and NCCL need many files and pinned memory for RDMA.
LimitNOFILE=1048576
LimitMEMLOCK=infinity
# No MemoryMax: engines share this unit's cgroup, and a cap here would cap them all.
# Hardening (packages/agent/README.md, "Service", says why each line is here and why
# some obvious ones are not). The agent stays root: it starts engines as
# LLMGW_ENGINE_USER (setpriv), signals them, reads /proc and /sys, runs nvidia-smi.
NoNewPrivileges=yes
ProtectSystem=strict
StateDirectory=${path.basename(o.stateDir)}
StateDirectoryMode=0711
UMask=0077
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes

[Install]
WantedBy=multi-user.target
`;
}

/** The environment file: the join token and settings, readable by root only. */
export function renderEnv(settings: Record<string, string>): string {
  const lines = ['# llmgw-agent settings; see `llmgw-agent run --help` for every variable.'];
  for (const [k, v] of Object.entries(settings)) {
    if (/[\n"]/.test(v)) throw new Error(`invalid value for ${k}: quotes and newlines are not allowed`);
    lines.push(`${k}="${v}"`);
  }
  return `${lines.join('\n')}\n`;
}

export interface InstallOptions {
  /** Prefix for every path written; `/` on a real machine, a temp dir in tests. */
  root: string;
  env: Record<string, string>;
  enable: boolean;
  node: string;
  main: string;
}

/**
 * The commands that make the engine account: a system user (no login shell, its home
 * under the state dir so engine caches are writable under ProtectSystem=strict) in the
 * GPU groups that exist here; GPU device nodes are reached through them. An existing
 * account is only added to the groups.
 */
export function engineUserCommands(user: string, exists: boolean, groups: readonly string[]): string[][] {
  const cmds: string[][] = [];
  if (!exists) cmds.push(['useradd', '--system', '--user-group', '--home-dir', ENGINE_HOME, '--no-create-home', '--shell', '/usr/sbin/nologin', user]);
  if (groups.length > 0) cmds.push(['usermod', '--append', '--groups', groups.join(','), user]);
  return cmds;
}

const succeeds = (cmd: string, args: string[]): boolean => {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/** Creates (or completes) the engine account on this machine, and its home, owned by it, 0700. */
export function createEngineUser(user: string): void {
  const groups = GPU_GROUPS.filter((g) => succeeds('getent', ['group', g]));
  for (const [cmd = '', ...args] of engineUserCommands(user, succeeds('getent', ['passwd', user]), groups)) execFileSync(cmd, args, { stdio: 'inherit' });
  fs.mkdirSync(STATE_DIR, { recursive: true, mode: 0o711 });
  fs.mkdirSync(ENGINE_HOME, { recursive: true, mode: 0o700 });
  execFileSync('chown', [`${user}:`, ENGINE_HOME]);
}

/**
 * Writes the unit and the env file and, on this machine (root `/`), creates the engine
 * user; then (`enable`) reloads systemd and enables the service. Under another `root`
 * prefix (packaging) no user is made: that is the package's post-install step.
 */
export function installService(o: InstallOptions): { unitPath: string; envPath: string } {
  const envFile = '/etc/llmgw/agent.env';
  const unitPath = path.join(o.root, 'etc/systemd/system/llmgw-agent.service');
  const envPath = path.join(o.root, envFile);
  fs.mkdirSync(path.dirname(unitPath), { recursive: true });
  fs.mkdirSync(path.dirname(envPath), { recursive: true, mode: 0o755 });
  // It holds the join token: 0600 also over an older, looser file.
  writePrivateFile(envPath, renderEnv(o.env));
  fs.writeFileSync(unitPath, renderUnit({ node: o.node, main: o.main, envFile, stateDir: STATE_DIR }));
  if (path.resolve(o.root) === '/') createEngineUser(o.env.LLMGW_ENGINE_USER ?? DEFAULT_ENGINE_USER);
  if (o.enable) {
    execFileSync('systemctl', ['daemon-reload'], { stdio: 'inherit' });
    execFileSync('systemctl', ['enable', '--now', 'llmgw-agent.service'], { stdio: 'inherit' });
  }
  return { unitPath, envPath };
}
