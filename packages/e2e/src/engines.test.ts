import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { ReplicaView } from '@llmgw/shared';
import { alive, cleanup, ctl, ctlJson, eventually, removeTmp, root, rows, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey: an operator lists a model in the catalog and the fleet runs it. The agent
 * starts the engine, restarts it when it dies, gives up on one that always crashes
 * (saying why), stops what the catalog no longer lists, and survives its own restart
 * without touching the engines.
 */

const fakeVllm = path.join(root, 'packages/e2e/fixtures/fake-vllm.mjs');

function catalogFile(models: string): string {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(file, models);
  return file;
}

const echoModel = (name: string, extra = '') => `
  - name: ${name}
    source: test
    profiles:
      - name: cpu
        engine: command
        command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"${extra}]
        startup_timeout_s: 20
`;

async function readyReplica(server: string, model: string): Promise<ReplicaView> {
  return eventually(
    async () => {
      const rs = await ctlJson<ReplicaView[]>(server, ['replicas', '--model', model, '--show-keys']);
      return rs.find((r) => r.state === 'ready' && r.endpoint && r.shards[0]?.pid);
    },
    30_000,
    `${model} ready`,
  );
}

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('engines on a node', () => {
  it('serves a model, restarts a killed engine, fails a crash loop with its log, and stops what the catalog drops', async () => {
    const file = catalogFile(`models:${echoModel('echo')}${echoModel('crashy', ', --exit-immediately, "3"')}`);
    const server = await startServer({ catalog: file, args: ['--failed-backoff', '600'] });
    const fastRestarts = ['--stop-engines-on-exit', '--restart-backoff', '0.2', '--max-restarts', '2'];
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: fastRestarts });

    const first = await readyReplica(server.adminUrl, 'echo');
    const table = rows((await ctl(server.adminUrl, ['replicas', '--model', 'echo'])).stdout);
    expect(table.get(first.id)).toMatchObject({ MODEL: 'echo', STATE: 'ready', NODES: 'cpu-1', ENDPOINT: first.endpoint });

    // The engine answers its key, and only its key.
    const chat = await fetch(`${first.endpoint}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hello there' }] }),
    });
    expect(chat.status).toBe(200);
    expect(((await chat.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('echo: hello there');
    const noKey = await fetch(`${first.endpoint}/v1/models`);
    expect(noKey.status).toBe(401);

    // SIGKILL: the agent restarts it and the replica is ready again with a new pid.
    const pid = first.shards[0]!.pid!;
    process.kill(pid, 'SIGKILL');
    const again = await eventually(
      async () => {
        const r = (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'echo']))[0];
        return r && r.state === 'ready' && r.shards[0]!.pid !== pid && r;
      },
      30_000,
      'echo restarted',
    );
    expect(again.id).toBe(first.id);
    expect(alive(again.shards[0]!.pid!)).toBe(true);

    // A crash loop ends failed, with the engine's last words in ctl replicas.
    const crashy = await eventually(
      async () => {
        const r = (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'crashy']))[0];
        return r?.state === 'failed' && r;
      },
      60_000,
      'crashy failed',
    );
    expect(crashy.error).toMatch(/exited with code 3/);
    expect(crashy.error).toMatch(/fatal: cannot load model crashy/);
    const text = await ctl(server.adminUrl, ['replicas', '--model', 'crashy']);
    expect(text.stdout).toMatch(/failed/);
    expect(text.stdout).toMatch(/fatal: cannot load model crashy/);
    const logs = await eventually(
      async () => {
        const r = await ctl(server.adminUrl, ['logs', crashy.id]);
        return r.stdout.includes('fatal: cannot load model crashy') && r;
      },
      15_000,
      'crashy logs',
    );
    expect(logs.code).toBe(0);

    // Restarting the agent touches no engine.
    const before = await readyReplica(server.adminUrl, 'echo');
    const enginePid = before.shards[0]!.pid!;
    await agent.stop('SIGKILL');
    const agent2 = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', stateDir: agent.stateDir, args: fastRestarts });
    await agent2.waitFor(/joined the server/);
    await new Promise((r) => setTimeout(r, 2500));
    const after = await readyReplica(server.adminUrl, 'echo');
    expect(after.shards[0]!.pid).toBe(enginePid);
    expect(after.shards[0]!.restarts ?? 0).toBe(before.shards[0]!.restarts ?? 0);
    expect(agent2.output()).not.toMatch(/launch/i);

    // Dropping the model from the catalog stops its engine's whole process group.
    fs.writeFileSync(file, `models:${echoModel('crashy', ', --exit-immediately, "3"')}`);
    await eventually(
      async () => !alive(enginePid) && (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'crashy'])).length === 1,
      20_000,
      'echo engine gone',
    );
    let groupGone = false;
    try {
      process.kill(-enginePid, 0);
    } catch {
      groupGone = true;
    }
    expect(groupGone).toBe(true);
    await agent2.stop();
  });

  it('starts a two-shard vLLM replica: rank 0 serves HTTP, rank 1 runs headless pointed at rank 0', async () => {
    const record = tmpDir('llmgw-argv-');
    const file = catalogFile(`models:
  - name: big
    source: org/big-model
    profiles:
      - name: two-nodes
        engine: vllm
        gpus: 1
        gpu_class: [RTX-4090]
        shards: 2
        fabric: infiniband
        startup_timeout_s: 20
        # Through the profile: engines do not inherit the agent's environment.
        env: { VLLM_TEST_RECORD_DIR: ${JSON.stringify(record)} }
`);
    const server = await startServer({ catalog: file });
    const common = {
      server: server.adminUrl,
      nvidiaSmi: 'rtx4090x2',
      proc: 'cpu-32gb',
      sys: 'ib',
      pool: 'rack-a',
      args: ['--vllm-bin', fakeVllm, '--stop-engines-on-exit'],
    };
    startAgent({ ...common, nodeId: 'gpu-a' });
    startAgent({ ...common, nodeId: 'gpu-b' });

    const replica = await eventually(
      async () => {
        const r = (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'big']))[0];
        return r?.state === 'ready' && r;
      },
      30_000,
      'big ready',
    );
    expect(replica.pool).toBe('rack-a');
    expect(replica.shards.map((s) => s.node).sort()).toEqual(['gpu-a', 'gpu-b']);

    const rank0 = JSON.parse(fs.readFileSync(path.join(record, 'big-rank0.json'), 'utf8')) as {
      argv: string[];
      cuda_visible_devices: string;
      cuda_device_order: string;
      has_vllm_api_key: boolean;
    };
    const rank1 = JSON.parse(fs.readFileSync(path.join(record, 'big-rank1.json'), 'utf8')) as typeof rank0;
    const head = replica.shards.find((s) => s.rank === 0)!;
    const flag = (argv: string[], f: string) => argv[argv.indexOf(f) + 1];
    expect(rank0.argv.slice(0, 2)).toEqual(['serve', 'org/big-model']);
    expect(rank0.argv).not.toContain('--headless');
    expect(flag(rank0.argv, '--served-model-name')).toBe('big');
    expect(flag(rank0.argv, '--node-rank')).toBe('0');
    expect(rank1.argv).toContain('--headless');
    expect(flag(rank1.argv, '--node-rank')).toBe('1');
    expect(flag(rank1.argv, '--nnodes')).toBe('2');
    // Followers point at rank 0's node and the replica's master port.
    expect(flag(rank1.argv, '--master-addr')).toBe('127.0.0.1');
    expect(flag(rank1.argv, '--master-port')).toBe(flag(rank0.argv, '--master-port'));
    expect(replica.endpoint).toBe(`http://127.0.0.1:${head.port}`);
    expect(rank0.cuda_visible_devices).toMatch(/^GPU-[0-9a-f-]+$/);
    expect(rank0.cuda_device_order).toBe('PCI_BUS_ID');
    // The key is in vLLM's own variable on every rank, never on a command line.
    for (const r of [rank0, rank1]) expect([r.argv.includes('--api-key'), r.has_vllm_api_key]).toEqual([false, true]);
  });
});
