import fs from 'node:fs';
import path from 'node:path';
import { afterAll, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, NodeView, ReplicaView, StatusView, UsageRow } from '@llmgw/shared';
import { ECHO_CATALOG, bins, cleanup, ctl, ctlJson, eventually, freePort, removeTmp, run, startAgent, startServer, tmpDir } from './harness.js';
import { describePostgres, dropDatabases, freshDatabase } from './postgres.js';

/**
 * Journey (issue 16): the upgrade from one server on SQLite to PostgreSQL. A running
 * install (an agent, a ready replica, a cordon, a key with usage) is stopped, migrated
 * with `llmgw-server migrate --from-sqlite`, and started on the database with the same
 * data dir and address: the agent stays joined, its engine is adopted rather than
 * relaunched, and the cordon, the key and its usage are all still there.
 */

afterAll(async () => {
  await cleanup();
  await dropDatabases();
  removeTmp();
});

describePostgres('migrating a SQLite install to PostgreSQL', () => {
  it('keeps the admin states, replicas (engines not relaunched), keys and usage', async () => {
    const catalog = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(catalog, ECHO_CATALOG);
    const dataDir = tmpDir('llmgw-server-');
    const adminAddr = `127.0.0.1:${await freePort()}`;
    const sqlite = await startServer({ dataDir, catalog, adminAddr });
    const agent = startAgent({ server: sqlite.adminUrl, nodeId: 'cpu-a', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
    const before = await eventually(
      async () => (await ctlJson<ReplicaView[]>(sqlite.adminUrl, ['replicas'])).find((r) => r.state === 'ready'),
      30_000,
      'a ready replica',
    );
    expect((await ctl(sqlite.adminUrl, ['cordon', 'cpu-a', '--reason', 'disk check'])).code).toBe(0);
    const key = await ctlJson<KeyCreated>(sqlite.adminUrl, ['keys', 'create', '--name', 'app']);
    const chat = (clientUrl: string) =>
      new OpenAI({ apiKey: key.secret, baseURL: `${clientUrl}/v1`, maxRetries: 0 }).chat.completions.create({
        model: 'echo',
        messages: [{ role: 'user', content: 'a b c' }],
      });
    for (let i = 0; i < 3; i++) await chat(sqlite.clientUrl);
    // SIGTERM writes the usage still in memory before the server exits.
    await sqlite.stop('SIGTERM');

    const db = await freshDatabase();
    const migrate = run(bins.server, ['migrate', '--from-sqlite', path.join(dataDir, 'llmgw.db'), '--database-url', db]);
    const code = await new Promise<number | null>((resolve) => migrate.child.once('exit', resolve));
    expect([code, migrate.output()]).toEqual([
      0,
      expect.stringMatching(/^migrated 1 node, 1 node credential, 1 replica, 1 key, 1 usage row, .* and secrets join-token, engine-key-secret, tls\/ca from /m),
    ]);
    console.log(`migrate: ${migrate.output().trim()}`);

    const pg = await startServer({ dataDir, catalog, adminAddr, args: ['--database-url', db, '--instance-id', 'after-migrate'] });
    expect(pg.adminUrl).toBe(sqlite.adminUrl);
    expect((await ctlJson<StatusView>(pg.adminUrl, ['status'])).store).toBe('postgres');
    const after = await eventually(
      async () => {
        const rs = await ctlJson<ReplicaView[]>(pg.adminUrl, ['replicas']);
        return rs.length === 1 && rs[0]!.state === 'ready' && rs[0];
      },
      20_000,
      'the replica ready on PostgreSQL',
    );
    expect([after.id, after.shards[0]!.pid, after.shards[0]!.restarts ?? 0]).toEqual([before.id, before.shards[0]!.pid, 0]);
    expect((agent.output().match(/"msg":"engine started"/g) ?? []).length).toBe(1);
    expect((await ctlJson<NodeView[]>(pg.adminUrl, ['nodes'])).find((n) => n.id === 'cpu-a')).toMatchObject({
      state: 'cordoned',
      state_reason: 'disk check',
      liveness: 'ready',
    });

    const usage = () => ctlJson<UsageRow[]>(pg.adminUrl, ['usage']).then((rows) => rows.find((u) => u.key_id === key.key.id && u.model === 'echo')?.requests);
    expect(await usage()).toBe(3);
    const reply = await chat(pg.clientUrl);
    expect(reply.choices[0]!.message.content).toBe('echo: a b c');
    expect(await usage()).toBe(4);
  }, 90_000);
});
