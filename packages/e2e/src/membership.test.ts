import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NodeView, ReplicaView } from '@llmgw/shared';
import { ECHO_CATALOG, alive, cleanup, ctl, ctlJson, eventually, freePort, removeTmp, rows, startAgent, startServer, tmpDir, type Proc } from './harness.js';

/**
 * Journeys (issue 12): who is in the fleet. A second machine claiming a joined node's
 * id is refused in one line and the first keeps its engines; `ctl nodes delete` frees
 * the id; `ctl join-token rotate` stops the old token joining while joined nodes keep
 * working; under `--join-approval manual` a new node waits until `ctl nodes approve`.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const catalog = ECHO_CATALOG;
function catalogFile(): string {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(file, catalog);
  return file;
}

/** The exit code of a process that must exit by itself; a failure, not a hang, when it does not. */
function exited(p: Proc, ms = 20_000): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (p.child.exitCode !== null) return resolve(p.child.exitCode);
    const t = setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${p.output().slice(-2000)}`)), ms);
    p.child.once('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}
const errorLines = (p: Proc) =>
  p
    .output()
    .split('\n')
    .filter((l) => l.includes('"level":50'));
const readyReplica = (url: string, node: string) =>
  eventually(
    async () => {
      const rs = await ctlJson<ReplicaView[]>(url, ['replicas']);
      return rs.find((r) => r.state === 'ready' && r.shards.every((s) => s.node === node));
    },
    40_000,
    `a ready replica on ${node}`,
  );

describe('node ids', () => {
  it('refuses a second machine with a joined id in one line, keeps the first one engines, and frees the id on delete', async () => {
    const server = await startServer({ catalog: catalogFile() });
    const url = server.adminUrl;
    const first = startAgent({ server: url, nodeId: 'node-a', proc: 'cpu-32gb' });
    const replica = await readyReplica(url, 'node-a');
    const pids = replica.shards.map((s) => s.pid!);
    expect(pids.every((p) => alive(p))).toBe(true);

    const second = startAgent({ server: url, nodeId: 'node-a', proc: 'cpu-8gb' });
    expect(await exited(second)).toBe(1);
    const lines = errorLines(second);
    expect(lines).toHaveLength(1);
    expect((JSON.parse(lines[0]!) as { msg: string }).msg).toBe(
      `the server at ${url} refused to let this machine join as node node-a (409): node "node-a" has already joined with its own credential, so another machine cannot take its name; if this machine replaces it, free the name with: ctl nodes delete node-a (or start this agent with another --node-id)`,
    );
    // The first machine is untouched: same replica, same engine processes, its own report.
    await new Promise((r) => setTimeout(r, 2000));
    const after = await ctlJson<ReplicaView[]>(url, ['replicas']);
    expect(after).toEqual([expect.objectContaining({ id: replica.id, state: 'ready' })]);
    expect(after[0]!.shards.map((s) => s.pid)).toEqual(pids);
    expect(pids.every((p) => alive(p))).toBe(true);
    const nodes = await ctlJson<NodeView[]>(url, ['nodes']);
    expect(nodes).toEqual([expect.objectContaining({ id: 'node-a', liveness: 'ready', memory_gb: 32 })]);

    // Delete: refused while it holds the replica, then forced; the id is free again.
    const refused = await ctl(url, ['nodes', 'delete', 'node-a']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^error: node node-a holds 1 replica\\(s\\) \\(${replica.id}\\): drain it first \\(ctl drain node-a\\), or delete it with --force, which drops them so they are placed elsewhere\\n$`,
      ),
    );
    await first.stop();
    const forced = await ctl(url, ['nodes', 'delete', 'node-a', '--force']);
    expect([forced.code, forced.stdout]).toEqual([0, 'node/node-a deleted; 1 replica(s) dropped, to be placed elsewhere\n']);
    expect(await ctlJson<NodeView[]>(url, ['nodes'])).toEqual([]);
    expect((await ctl(url, ['nodes', 'delete', 'node-a'])).stderr).toBe('error: no node "node-a" (see ctl nodes)\n');

    const replacement = startAgent({ server: url, nodeId: 'node-a', proc: 'cpu-8gb', stateDir: second.stateDir });
    await replacement.waitFor(/joined the server with its own credential/);
    await eventually(
      async () => (await ctlJson<NodeView[]>(url, ['nodes'])).find((n) => n.id === 'node-a' && n.liveness === 'ready' && n.memory_gb === 8),
      20_000,
      'node-a back, as the new machine',
    );
    const moved = await readyReplica(url, 'node-a');
    expect(moved.id).not.toBe(replica.id);
  }, 120_000);
});

describe('join token rotation', () => {
  it('prints a new token; joined nodes keep working; the old token stops joining, also after a restart', async () => {
    const port = await freePort();
    const dataDir = tmpDir('llmgw-server-');
    // No LLMGW_JOIN_TOKEN: the server generates the token into its data directory.
    const server = await startServer({ dataDir, adminAddr: `127.0.0.1:${port}`, env: { LLMGW_JOIN_TOKEN: '' } });
    const url = server.adminUrl;
    const oldToken = fs.readFileSync(path.join(dataDir, 'join-token'), 'utf8').trim();
    const joined = startAgent({ server: url, nodeId: 'joined', token: oldToken });
    await joined.waitFor(/joined the server/);

    const rotated = await ctl(url, ['join-token', 'rotate']);
    expect(rotated.code).toBe(0);
    const newToken = rotated.stdout.trim();
    expect(rotated.stdout).toBe(`${newToken}\n`);
    expect(newToken).not.toBe(oldToken);
    expect(rotated.stderr).toMatch(/^join token rotated: joined nodes keep working/);
    expect(fs.readFileSync(path.join(dataDir, 'join-token'), 'utf8')).toBe(`${newToken}\n`);

    const late = startAgent({ server: url, nodeId: 'late', token: oldToken });
    expect(await exited(late)).toBe(1);
    expect(errorLines(late).map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual([
      `the server at ${url} rejected the join token (invalid join token): set LLMGW_JOIN_TOKEN to the server's current join token`,
    ]);
    startAgent({ server: url, nodeId: 'fresh', token: newToken });

    // Restarted on the same address: the new token is kept, the old one still does not join.
    await server.stop();
    await startServer({ dataDir, adminAddr: `127.0.0.1:${port}`, env: { LLMGW_JOIN_TOKEN: '' } });
    const again = startAgent({ server: url, nodeId: 'after-restart', token: oldToken });
    expect(await exited(again)).toBe(1);
    startAgent({ server: url, nodeId: 'after-restart', token: newToken });
    await eventually(
      async () => {
        const ns = await ctlJson<NodeView[]>(url, ['nodes']);
        return ns.length === 3 && ns.every((n) => n.liveness === 'ready') && ns;
      },
      25_000,
      'joined, fresh and after-restart live',
    );
    expect(joined.child.exitCode).toBeNull();
    expect((await ctlJson<NodeView[]>(url, ['nodes'])).map((n) => n.id).sort()).toEqual(['after-restart', 'fresh', 'joined']);
  }, 120_000);

  it('leaves a token set by LLMGW_JOIN_TOKEN to the environment, in one line', async () => {
    const server = await startServer();
    const r = await ctl(server.adminUrl, ['join-token', 'rotate']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: this server takes its join token from LLMGW_JOIN_TOKEN, which ctl cannot change: set a new value there and restart the server (joined nodes keep working with their own credentials)\n',
    );
  });
});

describe('manual approval', () => {
  it('keeps a new node pending-approval, with no placement, until ctl nodes approve', async () => {
    const server = await startServer({ catalog: catalogFile(), args: ['--join-approval', 'manual'] });
    const url = server.adminUrl;
    const agent = startAgent({ server: url, nodeId: 'big', nvidiaSmi: 'h100-lost-one', proc: 'h100', sys: 'ib' });
    await agent.waitFor(/joined the server; waiting for approval \(ctl nodes approve big\)/);
    await eventually(async () => (await ctlJson<NodeView[]>(url, ['nodes'])).find((n) => n.liveness === 'ready'), 20_000, 'big reporting');
    expect(rows((await ctl(url, ['nodes'])).stdout).get('big')).toMatchObject({ STATE: 'pending-approval', GPUS: '-' });
    await new Promise((r) => setTimeout(r, 2000));
    expect(await ctlJson<ReplicaView[]>(url, ['replicas'])).toEqual([]);
    expect((await ctl(url, ['explain', 'echo'])).stdout).toContain('is waiting for approval (ctl nodes approve big)');
    const uncordon = await ctl(url, ['uncordon', 'big']);
    expect([uncordon.code, uncordon.stderr]).toEqual([
      1,
      'error: node big is waiting for approval: approve it with ctl nodes approve big, or remove it with ctl nodes delete big\n',
    ]);

    expect((await ctl(url, ['nodes', 'approve', 'big'])).stdout).toBe('node/big approved\n');
    await readyReplica(url, 'big');
    expect(rows((await ctl(url, ['nodes'])).stdout).get('big')).toMatchObject({ STATE: 'ready' });
    expect((await ctl(url, ['nodes', 'approve', 'big'])).stderr).toBe('error: node big is not waiting for approval (it is ready)\n');
  }, 90_000);
});
