import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { EventView, ReplicaView, TokenCreated } from '@llmgw/shared';
import { ADMIN_TOKEN, bins, cleanup, ctl, ctlJson, ECHO_CATALOG, eventually, removeTmp, rows, run, startAgent, startServer, tmpDir } from './harness.js';

/**
 * `ctl events` as an operator uses it after a maintenance: who cordoned which node and
 * why, and what the reconciler did about a drain, with the real ctl, server and agents.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const agentArgs = ['--stop-engines-on-exit', '--restart-backoff', '0.2'];

describe('ctl events', () => {
  it('lists a cordon with its reason and token name, and the replacement a drain made', async () => {
    const catalog = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(catalog, ECHO_CATALOG);
    const server = await startServer({ catalog, args: ['--min-healthy', '1'] });
    startAgent({ server: server.adminUrl, nodeId: 'cpu-a', args: agentArgs });
    startAgent({ server: server.adminUrl, nodeId: 'cpu-b', args: agentArgs });
    const first = await eventually(
      async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas'])).find((r) => r.state === 'ready'),
      30_000,
      'a ready replica',
    );
    const from = first.shards[0]!.node;
    const other = from === 'cpu-a' ? 'cpu-b' : 'cpu-a';

    // An operator with a token of her own cordons the spare node, then lets it take work again.
    const alice = (await ctlJson<TokenCreated>(server.adminUrl, ['tokens', 'create', '--name', 'ops-alice', '--role', 'admin'])).secret;
    const asAlice = { LLMGW_ADMIN_TOKEN: alice };
    expect((await ctl(server.adminUrl, ['cordon', other, '--reason', 'PSU swap'], asAlice)).code).toBe(0);

    // A watcher started now sees what follows as it happens.
    const watch = run(bins.ctl, ['events', '-w', '--node', other], {
      LLMGW_SERVER: server.adminUrl,
      LLMGW_ADMIN_TOKEN: ADMIN_TOKEN,
      LLMGW_CA: server.caFile ?? '',
      LLMGW_HOME: tmpDir('llmgw-home-'),
    });
    await watch.waitFor(/cordon .*PSU swap/, 10_000);
    expect((await ctl(server.adminUrl, ['uncordon', other], asAlice)).code).toBe(0);
    await watch.waitFor(/uncordon\s+node\/\S+\s+uncordoned by "ops-alice"/, 10_000);
    await watch.stop();

    const drain = await ctl(server.adminUrl, ['drain', from, '--reason', 'kernel upgrade', '--timeout', '60s']);
    expect(drain.code).toBe(0);

    const listed = await ctl(server.adminUrl, ['events']);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^AGE\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/);
    const byReason = (reason: string) => lines.filter((l) => new RegExp(`^\\S+\\s+\\S+\\s+${reason}\\s`).test(l));
    expect(byReason('cordon')).toEqual([expect.stringMatching(new RegExp(`Normal\\s+cordon\\s+node/${other}\\s+cordoned by "ops-alice": PSU swap$`))]);
    expect(byReason('drain')).toEqual([expect.stringMatching(new RegExp(`drain\\s+node/${from}\\s+drain started by "admin token": kernel upgrade$`))]);
    expect(byReason('drain-replacement')).toEqual([
      expect.stringMatching(new RegExp(`replica/r-\\S+\\s+placed on ${other} \\(model echo, profile cpu\\): replaces ${first.id} on draining node ${from}$`)),
    ]);
    expect(byReason('drained')).toEqual([expect.stringMatching(new RegExp(`replica/${first.id}\\s+removed on ${from}: `))]);
    // Oldest first: the drain comes before the replacement it caused, and that before the removal.
    const order = ['drain', 'drain-replacement', 'drained'].map((r) => lines.indexOf(byReason(r)[0]!));
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect([...rows(listed.stdout).keys()].every((age) => /^\d+[smhd]$/.test(age))).toBe(true);

    // Filters, and the JSON a script reads.
    const onFrom = await ctlJson<EventView[]>(server.adminUrl, ['events', '--node', from]);
    expect(onFrom.map((e) => e.reason)).toEqual(expect.arrayContaining(['drain', 'drain-replacement', 'drained']));
    expect(onFrom.some((e) => e.reason === 'cordon')).toBe(false);
    const json = await ctlJson<EventView[]>(server.adminUrl, ['events', '--model', 'echo']);
    expect(json.every((e) => e.model === 'echo' && e.source === 'reconciler')).toBe(true);
    expect(json.find((e) => e.reason === 'drain-replacement')).toMatchObject({
      type: 'Normal',
      nodes: [other, from],
      object: expect.stringMatching(/^replica\/r-/),
    });
  }, 60_000);
});
