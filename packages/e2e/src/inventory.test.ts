import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NodeView } from '@llmgw/shared';
import {
  ADMIN_TOKEN,
  JOIN_TOKEN,
  adminFetch,
  cleanup,
  ctl,
  ctlJson,
  eventually,
  removeTmp,
  rows,
  startAgent,
  startServer,
  tmpDir,
  freePort,
} from './harness.js';

/**
 * Journey: an operator installs agents on three machines and looks at the fleet with
 * `ctl nodes`; cordons, drains and uncordons; restarts the server and finds the states
 * kept. Hardware is fixture nvidia-smi executables and fixture /proc and /sys roots.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('fleet inventory through ctl', () => {
  it('shows three fixture machines, keeps admin states across a restart, and explains errors in one line', async () => {
    const port = await freePort();
    const dataDir = tmpDir('llmgw-server-');
    const server = await startServer({ dataDir, adminAddr: `127.0.0.1:${port}` });
    const url = server.adminUrl;
    startAgent({ server: url, nodeId: 'gpu-h100', nvidiaSmi: 'h100-lost-one', proc: 'h100', sys: 'ib' });
    startAgent({ server: url, nodeId: 'cpu-small', proc: 'cpu-8gb' });
    startAgent({ server: url, nodeId: 'old-agent', proc: 'no-memtotal' });

    const nodes = await eventually(
      async () => {
        const ns = await ctlJson<NodeView[]>(url, ['nodes']);
        return ns.length === 3 && ns.every((n) => n.liveness === 'ready') && ns;
      },
      20_000,
      'three live nodes',
    );

    const table = await ctl(url, ['nodes']);
    expect(table.code).toBe(0);
    const byName = rows(table.stdout);
    expect(byName.get('cpu-small')).toMatchObject({ STATE: 'ready', GPUS: '0/0', 'MEM(GiB)': '8', CLASS: '-' });
    expect(byName.get('old-agent')).toMatchObject({ 'MEM(GiB)': '-', GPUS: '0/0' });
    // A GPU that fell off the bus is neither free nor hidden.
    expect(byName.get('gpu-h100')).toMatchObject({ GPUS: '7/8', CLASS: 'H100-80GB' });
    expect(byName.get('gpu-h100')!.FABRICS).toContain('infiniband');
    expect(byName.get('gpu-h100')!.FABRICS).toContain('nvlink');
    expect(table.stdout).toMatch(/gpu-h100: gpu 3: .*fell off the bus/);

    const h100 = nodes.find((n) => n.id === 'gpu-h100')!;
    expect(h100.gpu_total).toBe(8);
    expect(h100.gpu_free).toBe(7);
    expect(h100.unhealthy_gpus).toEqual([expect.stringMatching(/^gpu 3: .*fell off the bus/)]);
    expect(nodes.find((n) => n.id === 'old-agent')).not.toHaveProperty('memory_gb');
    expect(nodes.find((n) => n.id === 'cpu-small')!.memory_gb).toBe(8);

    // Admin states through ctl.
    expect((await ctl(url, ['cordon', 'cpu-small', '--reason', 'maintenance: PSU swap'])).stdout).toBe('node/cpu-small cordoned\n');
    expect((await ctl(url, ['drain', 'old-agent'])).stdout).toBe('node/old-agent draining\nnode/old-agent drained\n');
    let after = rows((await ctl(url, ['nodes'])).stdout);
    expect(after.get('cpu-small')!.STATE).toBe('cordoned');
    expect(after.get('old-agent')!.STATE).toBe('draining');
    expect(after.get('gpu-h100')!.STATE).toBe('ready');

    // One-line errors with a non-zero exit.
    const unknown = await ctl(url, ['cordon', 'no-such-node']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('error: no node "no-such-node"\n');
    const badToken = await ctl(url, ['nodes'], { LLMGW_ADMIN_TOKEN: 'wrong' });
    expect(badToken.code).toBe(1);
    expect(badToken.stderr.trim().split('\n')).toHaveLength(1);
    expect(badToken.stderr).toMatch(/rejected the admin token.*LLMGW_ADMIN_TOKEN/);
    const down = await ctl('http://127.0.0.1:9', ['nodes']);
    expect(down.code).toBe(3);
    expect(down.stderr).toMatch(/^error: cannot reach the llmgw server at http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\).*LLMGW_SERVER\)\n$/);

    // Restart the server on the same address: admin states come back from the store.
    await server.stop();
    // Same address, so `url` still points at it; cleanup() stops it with the agents.
    await startServer({ dataDir, adminAddr: `127.0.0.1:${port}` });
    after = await eventually(
      async () => {
        const out = (await ctl(url, ['nodes'])).stdout;
        const r = rows(out);
        if (process.env.DEBUG_E2E) console.log(out);
        return r.size === 3 && [...r.values()].every((n) => n.STATE !== undefined && !n.STATE.includes('not-ready')) && r;
      },
      20_000,
      'nodes live again after restart',
    );
    expect(after.get('cpu-small')!.STATE).toBe('cordoned');
    expect(after.get('old-agent')!.STATE).toBe('draining');
    const json = await ctlJson<NodeView[]>(url, ['nodes']);
    expect(json.find((n) => n.id === 'cpu-small')!.state_reason).toBe('maintenance: PSU swap');

    await ctl(url, ['uncordon', 'cpu-small']);
    expect(rows((await ctl(url, ['nodes'])).stdout).get('cpu-small')!.STATE).toBe('ready');
  });

  it('refuses a malformed heartbeat with 400 naming the field and leaves the node as it was', async () => {
    const server = await startServer();
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-small', proc: 'cpu-8gb' });
    // A node is listed from its join on; its first report follows.
    const before = await eventually(async () => (await ctlJson<NodeView[]>(server.adminUrl, ['nodes'])).find((n) => n.hostname), 20_000, 'node');
    // Heartbeats carry the node's own credential (issue 12), which its agent keeps in its state directory.
    const { credential } = JSON.parse(fs.readFileSync(path.join(agent.stateDir, 'node-credential.json'), 'utf8')) as { credential: string };
    const good = {
      report: {
        node_id: 'cpu-small',
        hostname: 'evil',
        mgmt_addr: '10.0.0.9',
        agent_version: '9',
        labels: {},
        memory_total_mb: 999_999,
        gpus: [],
        fabrics: [],
      },
      shards: [],
    };
    // Malformed on purpose: each case writes a value of the wrong type into the report.
    const loose = (value: unknown): Record<string, unknown> => value as Record<string, unknown>;
    const cases: [string, (b: typeof good) => void][] = [
      ['report.memory_total_mb', (b) => (loose(b.report).memory_total_mb = 'lots')],
      ['report.gpus', (b) => (loose(b.report).gpus = {})],
      ['report.labels.role', (b) => (loose(b.report).labels = { role: 1 })],
      ['report.node_id', (b) => (loose(b.report).node_id = 42)],
      ['shards[0].pid', (b) => (loose(b).shards = [{ id: 'x', replica_id: 'r', state: 'ready', pid: 'one' }])],
    ];
    for (const [field, mutate] of cases) {
      const body = structuredClone(good);
      mutate(body);
      const res = await adminFetch(`${server.adminUrl}/agent/v1/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(400);
      const err = (await res.json()) as { error: string; field: string };
      expect(err.field).toBe(field);
      expect(err.error.startsWith(field)).toBe(true);
    }
    const noToken = await adminFetch(`${server.adminUrl}/agent/v1/heartbeat`, { method: 'POST', body: JSON.stringify(good) });
    expect(noToken.status).toBe(401);
    const adminWithJoin = await adminFetch(`${server.adminUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${JOIN_TOKEN}` } });
    expect(adminWithJoin.status).toBe(401);
    const nodes = (await (await adminFetch(`${server.adminUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as NodeView[];
    expect(nodes).toHaveLength(1);
    expect(nodes[0]).toMatchObject({ id: 'cpu-small', hostname: before.hostname, memory_gb: 8, agent_version: before.agent_version });
  });
});
