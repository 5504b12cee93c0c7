import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { ExplainView, ReplicaView } from '@llmgw/shared';
import { cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey: an operator runs the agent as root (as the systemd unit does) and the
 * engines it starts are not root: they run as `llmgw`, with that account's groups, and
 * see none of the agent's credentials. An agent that is not root runs engines as itself.
 * Separately: `engine: command` runs only where the operator allowed it.
 */

const isRoot = process.getuid?.() === 0;
const ENGINE_USER = 'llmgw';

/** `Uid:` and `Groups:` of a process, from /proc/<pid>/status. */
function identity(pid: number): { uid: number; groups: number[] } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
  const groups = (/^Groups:\s*(.*)$/m.exec(status)?.[1] ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
  return { uid, groups: groups.sort((a, b) => a - b) };
}

const environ = (pid: number): Map<string, string> =>
  new Map(
    fs
      .readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );

/**
 * The engine account as `install-service` would leave it. When it is missing, this test
 * creates it (useradd --system, no home, no login shell) and says so on stderr: it is
 * a system account on the machine running the tests, left in place afterwards.
 */
function ensureEngineUser(): { uid: number; groups: number[] } {
  try {
    execFileSync('id', ['-u', ENGINE_USER], { stdio: 'ignore' });
  } catch {
    process.stderr.write(`engine-user journey: creating system user ${ENGINE_USER} (useradd --system) for this test\n`);
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', ENGINE_USER]);
    // Like install-service: the GPU groups that exist, so --init-groups has something to set.
    for (const g of ['video', 'render']) {
      try {
        execFileSync('getent', ['group', g], { stdio: 'ignore' });
        execFileSync('usermod', ['-aG', g, ENGINE_USER]);
      } catch {
        /* no such group here */
      }
    }
  }
  const uid = Number(execFileSync('id', ['-u', ENGINE_USER], { encoding: 'utf8' }).trim());
  const groups = execFileSync('id', ['-G', ENGINE_USER], { encoding: 'utf8' }).trim().split(/\s+/).map(Number);
  return { uid, groups: groups.sort((a, b) => a - b) };
}

function catalog(): string {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(
    file,
    `models:
  - name: echo
    source: test
    profiles:
      - name: cpu
        engine: command
        command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]
        startup_timeout_s: 20
`,
  );
  return file;
}

async function readyReplica(server: string, other?: number): Promise<ReplicaView> {
  return eventually(
    async () => {
      const rs = await ctlJson<ReplicaView[]>(server, ['replicas', '--model', 'echo', '--show-keys']);
      return rs.find((r) => r.state === 'ready' && r.shards[0]?.pid && r.shards[0].pid !== other);
    },
    30_000,
    'echo ready',
  );
}

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('engines without privileges', () => {
  it(`runs engines as ${isRoot ? ENGINE_USER : 'the agent user'}, without the agent's secrets, and re-adopts them after an agent restart`, async () => {
    const want = isRoot ? ensureEngineUser() : { uid: process.getuid!(), groups: [] };
    const server = await startServer({ catalog: catalog() });
    // Set in the agent's environment, as an operator's shell or env file might have them.
    process.env.AWS_SECRET_ACCESS_KEY = 'fake-agent-secret';
    process.env.NCCL_DEBUG = 'WARN';
    // The harness runs engines as the invoking user; a root agent's default is llmgw.
    const userArgs = isRoot ? ['--engine-user', ENGINE_USER] : [];
    const stateDir = tmpDir('llmgw-agent-');
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', stateDir, args: userArgs });
    delete process.env.AWS_SECRET_ACCESS_KEY;
    delete process.env.NCCL_DEBUG;

    const replica = await readyReplica(server.adminUrl);
    const pid = replica.shards[0]!.pid!;
    const engine = identity(pid);
    expect(engine.uid).toBe(want.uid);
    if (isRoot) expect(engine.groups).toEqual(want.groups);

    // The agent holds the join token; its engine has none of the agent's secrets.
    const agentEnv = environ(agent.child.pid!);
    const joinToken = agentEnv.get('LLMGW_JOIN_TOKEN');
    expect(joinToken).toBeTruthy();
    const engineEnv = environ(pid);
    // No LLMGW_ variable and nothing of the agent's comes along; not even the engine's own
    // key, which it reads from descriptor 3 (issue 27: other engines of the same user can
    // read a process's environment), from a 0400 file of the agent's that it could not open.
    const leaked = [...engineEnv].filter(
      ([k, v]) => k.startsWith('LLMGW_') || v.includes(joinToken!) || v.includes('fake-agent-secret') || v.includes(replica.api_key!),
    );
    expect(leaked).toEqual([]);
    expect(engineEnv.get('NCCL_DEBUG')).toBe('WARN');
    expect(engineEnv.get('USER')).toBe(isRoot ? ENGINE_USER : os.userInfo().username);

    // It serves: the switch did not cost the engine anything it needs.
    const chat = await fetch(`${replica.endpoint}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${replica.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);

    // An agent restart re-adopts the engine by pid and start time, user switch or not.
    await agent.stop();
    const again = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', stateDir, args: userArgs });
    await again.waitFor(/adopted running engine/);
    const after = await readyReplica(server.adminUrl);
    expect(after.shards[0]!.pid).toBe(pid);
  });

  (isRoot ? it : it.skip)('a root agent whose engine user does not exist says how to create it, and starts nothing', async () => {
    const server = await startServer({ catalog: catalog() });
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-2', args: ['--engine-user', 'no-such-llmgw-user'] });
    await agent.waitFor(/engine user "no-such-llmgw-user" does not exist: .*useradd --system.*install-service/);
    await eventually(() => agent.child.exitCode !== null, 5000, 'the agent to exit');
    expect(agent.child.exitCode).toBe(2);
  });
});

describe('engine: command needs --allow-command-engine', () => {
  it('is not placed on an agent that does not allow it, which explain says, and runs where allowed', async () => {
    const server = await startServer({ catalog: catalog() });
    const url = server.adminUrl;
    startAgent({ server: url, nodeId: 'locked', proc: 'cpu-32gb', allowCommandEngine: false });
    const explain = await eventually(
      async () => {
        const v = await ctlJson<ExplainView>(url, ['explain', 'echo']);
        return v.attempted && v.rejections.some((r) => r.code === 'command_engine') && v;
      },
      20_000,
      'a placement attempt',
    );
    expect(explain.placed).toBe(false);
    expect((await ctl(url, ['explain', 'echo'])).stdout).toMatch(/locked: does not allow engine: command \(start its agent with --allow-command-engine\)/);

    startAgent({ server: url, nodeId: 'open', proc: 'cpu-32gb' });
    const replica = await readyReplica(url);
    expect(replica.shards[0]!.node).toBe('open');
  });
});
