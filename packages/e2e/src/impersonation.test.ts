import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { KeyCreated, NodeView, ReplicaView } from '@llmgw/shared';
import { ECHO_CATALOG, JOIN_TOKEN, adminFetch, cleanup, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey (issue 12): someone holding only the join token — which every agent host
 * has — tries what took over a node before node credentials: read another node's
 * assignments (and its engine keys), send heartbeats as that node from another address
 * with its shard ready, mark its shard failed, register a node with many GPUs; then the
 * same through the new paths (a join as that node, a credential of its own). None of it
 * works: no assignment and no key of the other node, no client request reaches the
 * impersonator's address, and client traffic through the gateway succeeds throughout.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const catalog = ECHO_CATALOG;

/** 127.0.0.2 is loopback too: the impersonator's own address, where it listens on the engine's port. */
const IMPERSONATOR = '127.0.0.2';

describe('a join token holder impersonating a node', () => {
  it('gets no assignment, no key and no traffic of another node, while clients are served', async () => {
    const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(file, catalog);
    const server = await startServer({ catalog: file });
    const url = server.adminUrl;
    startAgent({ server: url, nodeId: 'victim', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
    const [replica] = await eventually(
      async () => {
        const rs = await ctlJson<ReplicaView[]>(url, ['replicas', '--show-keys']);
        return rs.length === 1 && rs[0]!.state === 'ready' && rs;
      },
      40_000,
      'a ready replica on victim',
    );
    const shard = replica!.shards[0]!;
    const engineKey = replica!.api_key!;
    const port = Number(new URL(replica!.endpoint!).port);
    expect(engineKey.length).toBeGreaterThan(8);

    // The impersonator's engine: counts every request that reaches its address.
    let hits = 0;
    const fake = http.createServer((req, res) => {
      hits++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'impersonated' } }] }));
    });
    await new Promise<void>((r) => fake.listen(port, IMPERSONATOR, r));

    // Client traffic the whole time.
    const secret = (await ctlJson<KeyCreated>(url, ['keys', 'create', '--name', 'app'])).secret;
    const answers: string[] = [];
    let trafficOn = true;
    const traffic = (async () => {
      while (trafficOn) {
        const r = await fetch(`${server.clientUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'ping' }] }),
        });
        const body = (await r.json()) as { choices?: { message: { content: string } }[] };
        answers.push(`${r.status} ${body.choices?.[0]?.message.content ?? JSON.stringify(body)}`);
        await new Promise((res) => setTimeout(res, 50));
      }
    })();

    const bodies: string[] = [];
    const agentCall = async (method: string, p: string, token: string, body?: unknown) => {
      const r = await adminFetch(`${url}/agent/v1${p}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await r.text();
      bodies.push(text);
      return { status: r.status, text };
    };
    const report = (nodeId: string, extra: Record<string, unknown> = {}) => ({
      node_id: nodeId,
      hostname: 'evil',
      mgmt_addr: IMPERSONATOR,
      agent_version: '0.1.0',
      labels: {},
      memory_total_mb: 1 << 20,
      cpu_cores: 512,
      gpus: [],
      fabrics: [],
      ...extra,
    });
    const ready = { id: shard.id, replica_id: replica!.id, state: 'ready', port };
    const failed = { id: shard.id, replica_id: replica!.id, state: 'failed', error: 'impersonated failure' };
    const gpus = Array.from({ length: 64 }, (_, i) => ({
      index: i,
      uuid: `GPU-fake-${i}`,
      name: 'NVIDIA H100 80GB HBM3',
      class: 'H100-80GB',
      memory_total_mb: 81559,
      memory_used_mb: 0,
      problems: [],
    }));

    // As in the original attack, heartbeats as the victim keep coming, faster than its own.
    const hammer = async (token: string) => {
      const statuses = new Set<number>();
      for (let i = 0; i < 30; i++) {
        statuses.add((await agentCall('POST', '/heartbeat', token, { report: report('victim'), shards: [ready] })).status);
        await new Promise((r) => setTimeout(r, 50));
      }
      return { status: statuses.size === 1 ? [...statuses][0]! : -1, text: '' };
    };

    // The old paths, with the join token alone: every one is refused.
    const old = [
      await agentCall('GET', '/nodes/victim/assignments?after=-1&wait_ms=0', JOIN_TOKEN),
      await hammer(JOIN_TOKEN),
      await agentCall('POST', '/heartbeat', JOIN_TOKEN, { report: report('victim'), shards: [failed] }),
      await agentCall('POST', '/heartbeat', JOIN_TOKEN, { report: report('fake-gpus', { gpus }), shards: [] }),
    ];
    expect(old.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    expect(old[0]!.text).toMatch(/the join token only joins/);

    // The new paths: joining as the victim is refused; a credential of its own speaks for itself only.
    const asVictim = await agentCall('POST', '/join', JOIN_TOKEN, { node_id: 'victim' });
    expect(asVictim.status).toBe(409);
    expect(asVictim.text).toMatch(/node \\"victim\\" has already joined.*ctl nodes delete victim/);
    const joined = await agentCall('POST', '/join', JOIN_TOKEN, { node_id: 'intruder' });
    expect(joined.status).toBe(200);
    const own = (JSON.parse(joined.text) as { credential: string }).credential;
    const withOwn = [
      await agentCall('GET', '/nodes/victim/assignments?after=-1&wait_ms=0', own),
      await hammer(own),
      await agentCall('POST', '/heartbeat', own, { report: report('victim'), shards: [failed] }),
    ];
    expect(withOwn.map((r) => r.status)).toEqual([403, 403, 403]);
    // Reports about the victim's shard from the intruder's own node are not about its own shards: ignored.
    expect((await agentCall('POST', '/heartbeat', own, { report: report('intruder', { gpus }), shards: [ready, { ...failed, id: shard.id }] })).status).toBe(
      200,
    );
    expect((await agentCall('POST', '/heartbeat', own, { report: report('intruder', { gpus }), shards: [failed] })).status).toBe(200);
    const mine = await agentCall('GET', '/nodes/intruder/assignments?after=-1&wait_ms=0', own);
    expect(JSON.parse(mine.text)).toMatchObject({ node_id: 'intruder', assignments: [] });

    // Give reconcile passes and the gateway time to act on anything that got through.
    await new Promise((r) => setTimeout(r, 3000));
    trafficOn = false;
    await traffic;
    fake.close();

    for (const b of bodies) expect(b).not.toContain(engineKey);
    expect(hits).toBe(0);
    expect(answers.length).toBeGreaterThan(20);
    expect(answers.filter((a) => a !== '200 echo: ping')).toEqual([]);
    const after = await ctlJson<ReplicaView[]>(url, ['replicas']);
    expect(after).toEqual([expect.objectContaining({ id: replica!.id, state: 'ready', endpoint: replica!.endpoint })]);
    expect(after[0]!.shards).toEqual([expect.objectContaining({ node: 'victim', state: 'ready', port })]);
    const nodes = await ctlJson<NodeView[]>(url, ['nodes']);
    expect(nodes.find((n) => n.id === 'victim')).toMatchObject({ mgmt_addr: '127.0.0.1', liveness: 'ready' });
    expect(nodes.map((n) => n.id).sort()).toEqual(['intruder', 'victim']);
    process.stdout.write(
      `impersonation: ${old.length + withOwn.length + 1} kinds of attempt refused (60 heartbeats as the victim among them), ${answers.length} client requests all 200 from the real engine, ${hits} reached ${IMPERSONATOR}\n`,
    );
  }, 90_000);
});
