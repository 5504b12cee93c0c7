import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface ServiceOptions {
  /** Absolute path of the node binary and of the agent's built main.js. */
  node: string;
  main: string;
  envFile: string;
  stateDir: string;
}

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

/** Writes the unit and the env file, then reloads systemd and enables the service. */
export function installService(o: InstallOptions): { unitPath: string; envPath: string } {
  const envFile = '/etc/llmgw/agent.env';
  const unitPath = path.join(o.root, 'etc/systemd/system/llmgw-agent.service');
  const envPath = path.join(o.root, envFile);
  fs.mkdirSync(path.dirname(unitPath), { recursive: true });
  fs.mkdirSync(path.dirname(envPath), { recursive: true, mode: 0o755 });
  fs.writeFileSync(envPath, renderEnv(o.env), { mode: 0o600 });
  fs.chmodSync(envPath, 0o600);
  fs.writeFileSync(unitPath, renderUnit({ node: o.node, main: o.main, envFile, stateDir: '/var/lib/llmgw-agent' }));
  if (o.enable) {
    execFileSync('systemctl', ['daemon-reload'], { stdio: 'inherit' });
    execFileSync('systemctl', ['enable', '--now', 'llmgw-agent.service'], { stdio: 'inherit' });
  }
  return { unitPath, envPath };
}
