import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { ExplainView, ReplicaView } from '@llmgw/shared';
import { bins, cleanup, ctl, ctlJson, eventually, removeTmp, rows, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey: an operator lists a 24 GB CPU model and asks why it does not run. The answer
 * names every node and what it lacks; a node with room that joins gets the replica by
 * itself; a second replica is never squeezed onto a node the first one already fills.
 */

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('placement that explains itself', () => {
  it('explains node by node, places on a node that joins, and never overcommits memory', async () => {
    const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(file, 'models: []\n');
    const model = `models:
  - name: qwen-coder-14b
    aliases: [coder]
    source: t
    scaling: { min: 2, max: 2 }
    profiles:
      - name: cpu
        engine: command
        min_memory_gb: 24
        node_selector: { role: coding }
        command: ${engine}
`;
    const server = await startServer({ catalog: file });
    const url = server.adminUrl;
    startAgent({ server: url, nodeId: 'gpu-h100', nvidiaSmi: 'h100-lost-one', proc: 'h100', sys: 'ib' });
    startAgent({ server: url, nodeId: 'cpu-small', proc: 'cpu-8gb', labels: 'role=coding' });
    startAgent({ server: url, nodeId: 'old-agent', proc: 'no-memtotal', labels: 'role=coding' });
    startAgent({ server: url, nodeId: 'batch', proc: 'cpu-32gb', labels: 'role=batch' });
    await eventually(async () => (await ctlJson<unknown[]>(url, ['nodes'])).length === 4, 20_000, 'four nodes');
    // The memory-less node must not take the replica in this story: cordon it, then
    // add the model to the catalog (it reloads on change).
    await ctl(url, ['cordon', 'old-agent', '--reason', 'maintenance: PSU swap']);
    fs.writeFileSync(file, model);

    const explain = await eventually(
      async () => {
        const v = await ctlJson<ExplainView>(url, ['explain', 'coder']);
        return v.attempted && v.rejections.some((r) => r.node === 'old-agent' && r.code === 'cordoned') && v;
      },
      15_000,
      'an attempt after the cordon',
    );
    expect(explain.placed).toBe(false);
    const text = (await ctl(url, ['explain', 'coder'])).stdout;
    expect(text).toMatch(/^0\/4 nodes can run qwen-coder-14b: /);
    expect(text).toMatch(/cpu-small: has 8 GiB of memory, needs 24/);
    expect(text).toMatch(/old-agent: is cordoned \(maintenance: PSU swap\)/);
    expect(text).toMatch(/old-agent: .*memory (is )?unknown/);
    expect(text).toMatch(/gpu-h100: lacks label role=coding/);
    expect(text).toMatch(/batch: has label role=batch, needs role=coding/);
    const rej = explain.rejections.find((r) => r.node === 'cpu-small' && r.code === 'memory')!;
    expect(rej).toMatchObject({ requested: 24, available: 8 });
    expect((await ctl(url, ['models'])).stdout).toMatch(/qwen-coder-14b: 0\/4 nodes can run/);

    // A 32 GB coding node joins: the first replica lands there with no command given.
    startAgent({ server: url, nodeId: 'roomy', proc: 'cpu-32gb', labels: 'role=coding' });
    const placed = await eventually(
      async () => {
        const rs = await ctlJson<ReplicaView[]>(url, ['replicas', '--model', 'coder']);
        return rs.length >= 1 && rs;
      },
      15_000,
      'a replica on roomy',
    );
    expect(placed.map((r) => r.shards[0]!.node)).toEqual(['roomy']);

    // The second replica would need 24 GB more on a 32 GB node: it is not squeezed in.
    await new Promise((r) => setTimeout(r, 2000));
    expect(await ctlJson<ReplicaView[]>(url, ['replicas', '--model', 'coder'])).toHaveLength(1);
    const again = (await ctl(url, ['explain', 'coder'])).stdout;
    expect(again).toMatch(/roomy: has 32 GiB of memory, 24 reserved by 1 replica, needs 24/);
    const nodes = rows((await ctl(url, ['nodes'])).stdout);
    expect(nodes.get('roomy')!.REPLICAS).toBe('1');
    expect(nodes.get('cpu-small')!.REPLICAS).toBe('0');
  });

  it('refuses to start with a broken catalog, naming file, model, field and line', () => {
    const file = path.join(tmpDir('llmgw-catalog-'), 'broken.yaml');
    fs.writeFileSync(
      file,
      'models:\n  - name: m\n    source: s\n    profiles:\n      - name: p\n        engine: command\n        command: [x]\n        min_memory_gb: lots\n',
    );
    const r = spawnSync(
      process.execPath,
      [bins.server, '--catalog', file, '--data-dir', tmpDir(), '--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0'],
      { encoding: 'utf8', env: { ...process.env, LLMGW_ADMIN_TOKEN: 'a', LLMGW_JOIN_TOKEN: 'j' } },
    );
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe(`llmgw-server: catalog ${file}: model "m" (line 8): profiles[0].min_memory_gb must be number`);
  });
});
