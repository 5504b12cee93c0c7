import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { EventView, KeyCreated, ModelView, ReplicaView, RolloutView } from '@llmgw/shared';
import { cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir } from './harness.js';

/**
 * The rollout journey (issue 24): a changed model reaches its running replicas, start
 * before stop, under steady gateway traffic; a broken revision halts with the old one
 * serving; a revert and a scaling or alias change restart nothing.
 */

/** A journey that fails midway must still stop its traffic, or the workers spin on refused connections. */
let stopTraffic: (() => Promise<unknown>) | undefined;

afterAll(async () => {
  await stopTraffic?.();
  await cleanup();
  removeTmp();
});

const engine = (extra: string[]) =>
  `[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"${extra.map((e) => `, "${e}"`).join('')}]`;
const catalog = (extra: string[], more = '') =>
  `models:\n  - name: echo\n    source: t\n${more}    scaling: { min: 2, max: 2 }\n    rollout: { progress_deadline_s: 30 }\n    profiles:\n      - { name: cpu, engine: command, command: ${engine(extra)} }\n`;

/** Steady non-streamed and streamed traffic until stopped; every failure is kept. */
function load(client: OpenAI, model: string, workers = 4) {
  let running = true;
  let ok = 0;
  const failed: string[] = [];
  const done = Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      while (running) {
        try {
          if (i % 2) {
            for await (const _chunk of await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'a b c' }] }))
              void _chunk;
          } else {
            await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'a b c' }] });
          }
          ok++;
        } catch (e) {
          failed.push((e as Error).message);
          // A burst of failures is the finding; a thousand more say nothing new.
          if (failed.length > 100) running = false;
        }
      }
    }),
  );
  return { served: () => ok, failed, stop: async () => ((running = false), await done) };
}

const fast = ['--not-ready-after', '2', '--lost-after', '5', '--min-healthy', '1', '--reconcile-interval', '1', '--failed-backoff', '1'];
const agentArgs = ['--stop-engines-on-exit', '--restart-backoff', '0.2'];

describe('rollouts', () => {
  it('rolls a changed model over under load with no failed request, halts a broken one, and restarts nothing on a revert or a scaling change', async () => {
    const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    const v1 = catalog(['--token-delay-ms', '2']);
    fs.writeFileSync(file, v1);
    const server = await startServer({ catalog: file, args: fast });
    startAgent({ server: server.adminUrl, nodeId: 'cpu-a', proc: 'cpu-32gb', args: agentArgs });
    startAgent({ server: server.adminUrl, nodeId: 'cpu-b', proc: 'cpu-32gb', args: agentArgs });
    const replicas = () => ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
    const revision = async () => (await ctlJson<ModelView[]>(server.adminUrl, ['models']))[0]!.revision!;
    const ready = (rs: ReplicaView[]) =>
      rs
        .filter((r) => r.state === 'ready')
        .map((r) => r.id)
        .sort();
    const first = await eventually(
      async () => {
        const rs = await replicas();
        return rs.length === 2 && rs.every((r) => r.state === 'ready') && rs;
      },
      30_000,
      'two ready',
    );
    const rev1 = await revision();
    expect(first.map((r) => r.revision)).toEqual([rev1, rev1]);
    const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'load'])).secret;
    const traffic = load(new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0, timeout: 20_000 }), 'echo');
    stopTraffic = traffic.stop;
    await eventually(() => traffic.served() > 20, 10_000, 'traffic flowing');

    // New engine args: both replicas replaced, start before stop, within 60 s.
    const v2 = catalog(['--token-delay-ms', '3']);
    fs.writeFileSync(file, v2);
    const rev2 = await eventually(async () => ((await revision()) !== rev1 ? revision() : undefined), 10_000, 'the new revision');
    const started = Date.now();
    const status = await ctl(server.adminUrl, ['rollout', 'status', 'echo', '--timeout', '60s']);
    const tookMs = Date.now() - started;
    expect([status.code, status.stderr]).toEqual([0, '']);
    expect(status.stdout).toMatch(new RegExp(`rollout of echo to revision ${rev2} complete: 2 of 2 replicas ready\\n$`));
    expect(tookMs).toBeLessThan(60_000);
    console.log(`rollout of 2 replicas under load: ${tookMs} ms, ${traffic.served()} requests served so far`);
    const second = await replicas();
    expect(second.filter((r) => r.state === 'ready').map((r) => r.revision)).toEqual([rev2, rev2]);
    expect(ready(second).some((id) => first.some((r) => r.id === id))).toBe(false);

    // An engine that exits at start: the rollout halts, the serving replicas untouched.
    fs.writeFileSync(file, catalog(['--exit-immediately', '3']));
    await eventually(async () => ((await revision()) !== rev2 ? true : undefined), 10_000, 'the broken revision');
    const halted = await ctl(server.adminUrl, ['rollout', 'status', 'echo', '--timeout', '60s']);
    expect(halted.code).toBe(1);
    expect(halted.stderr).toMatch(/^error: rollout of echo to revision \w+ halted: replica r-\w+ of revision \w+ failed: .*cannot load model/m);
    expect(ready(await replicas())).toEqual(ready(second));

    // The revert: revision 2 again, current at once, nothing restarted.
    fs.writeFileSync(file, v2);
    await eventually(async () => ((await revision()) === rev2 ? true : undefined), 10_000, 'the reverted revision');
    const back = await ctl(server.adminUrl, ['rollout', 'status', 'echo', '--timeout', '30s']);
    expect(back.code).toBe(0);
    expect(ready(await replicas())).toEqual(ready(second));

    // Scaling and aliases are not in the revision: nothing restarts.
    fs.writeFileSync(
      file,
      v2
        .replace('scaling: { min: 2, max: 2 }', 'scaling: { min: 2, max: 3, target_in_flight: 100 }')
        .replace('    source: t\n', '    source: t\n    aliases: [echo-chat]\n'),
    );
    await eventually(async () => ((await ctlJson<ModelView[]>(server.adminUrl, ['models']))[0]!.aliases.length ? true : undefined), 10_000, 'the alias');
    const byAlias = await ctlJson<RolloutView>(server.adminUrl, ['rollout', 'status', 'echo-chat', '--no-wait']);
    expect(byAlias).toMatchObject({ model: 'echo', revision: rev2, state: 'complete', updated: 2, ready: 2, outdated: 0 });
    expect(ready(await replicas())).toEqual(ready(second));

    await traffic.stop();
    expect(traffic.failed).toEqual([]);

    const history = await ctl(server.adminUrl, ['rollout', 'history', 'echo']);
    expect(history.code).toBe(0);
    const lines = history.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^REVISION\s+SINCE\s+CURRENT\s+CHANGE$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual([rev1, expect.stringMatching(/^\w{12}$/), rev2]);
    expect(lines.at(-1)).toMatch(new RegExp(`^${rev2}\\s+\\S+\\s+\\*\\s+profiles\\.cpu\\.command: .*→`));
    // Pause and resume are the operator's: recorded as admin events, shown in the status.
    const paused = await ctl(server.adminUrl, ['rollout', 'pause', 'echo']);
    expect([paused.code, paused.stdout]).toEqual([0, `rollout of echo paused: 2 of 2 replicas at revision ${rev2}, 2 ready (complete)\n`]);
    expect(await ctlJson<RolloutView>(server.adminUrl, ['rollout', 'status', 'echo', '--no-wait'])).toMatchObject({ paused: true });
    expect((await ctl(server.adminUrl, ['rollout', 'resume', 'echo'])).code).toBe(0);
    const events = await ctlJson<EventView[]>(server.adminUrl, ['events', '--model', 'echo']);
    expect(events.map((e) => e.reason)).toEqual(
      expect.arrayContaining(['rollout-started', 'rollout', 'rolled-over', 'rollout-complete', 'rollout-halted', 'rollout-pause', 'rollout-resume']),
    );
    // Its own bounds (two rollouts of up to 60 s, a revert of up to 30 s) are the test's: jest's
    // default 60 s for the whole journey ran out under scripts/load.mjs while each step held.
  }, 180_000);
});
