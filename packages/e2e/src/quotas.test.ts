import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { KeyCreated, ReplicaView, UsageRow } from '@llmgw/shared';
import { ADMIN_TOKEN, ECHO_CATALOG, adminFetch, cleanup, ctl, ctlJson, eventually, removeTmp, rows, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey (issue 26): an operator gives a key a token quota and a band with ctl, the
 * key's client is refused with 429 and Retry-After once over it, the operator lifts it
 * with `ctl keys update`, and reads the tokens of the last hour with `ctl usage --since`;
 * the real binaries, a real server, agent and test engine.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const chat = (clientUrl: string, secret: string) =>
  fetch(`${clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi there' }] }),
  }).then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.text() }));

describe('token quotas with ctl', () => {
  it('keys create --tpm, a 429 with Retry-After over it, keys update lifts it, usage --since shows the tokens', async () => {
    const catalog = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(catalog, ECHO_CATALOG);
    const server = await startServer({ catalog });
    startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
    await eventually(async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas'])).some((r) => r.state === 'ready'), 40_000, 'a ready replica');

    const made = await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'tiny', '--tpm', '5', '--priority', 'batch']);
    const list = await ctl(server.adminUrl, ['keys', 'list']);
    expect(rows(list.stdout).get(made.key.id)).toMatchObject({ NAME: 'tiny', TPM: '5', RPM: '-', PRIORITY: 'batch' });

    // The test engine answers "hi there" with 2 prompt and 3 completion tokens: 5, the quota.
    expect((await chat(server.clientUrl, made.secret)).status).toBe(200);
    const over = await chat(server.clientUrl, made.secret);
    expect(over.status).toBe(429);
    expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(59);
    expect(JSON.parse(over.body)).toMatchObject({ error: { code: 'rate_limit_exceeded', message: expect.stringMatching(/^tpm: token quota of 5 tokens/) } });

    const updated = await ctl(server.adminUrl, ['keys', 'update', 'tiny', '--tpm', 'none']);
    expect([updated.code, updated.stdout.split('\n')[0]]).toEqual([0, `key/${made.key.id} updated`]);
    expect(rows(updated.stdout.split('\n').slice(1).join('\n')).get(made.key.id)).toMatchObject({ TPM: '-', PRIORITY: 'batch' });
    await eventually(async () => (await chat(server.clientUrl, made.secret)).status === 200, 5_000, 'the quota lifted');

    const usage = await ctlJson<UsageRow[]>(server.adminUrl, ['usage', '--since', '1h']);
    expect(usage.find((u) => u.key_id === made.key.id)).toMatchObject({ model: 'echo', requests: 2, prompt_tokens: 4, completion_tokens: 6 });
    const table = await ctl(server.adminUrl, ['usage', '--since', '1h']);
    expect(table.stdout).toMatch(/^KEY\s+MODEL\s+REQUESTS/);
    const bad = await ctl(server.adminUrl, ['usage', '--since', 'yesterday']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/since "yesterday" is not a duration or a time/);
    const none = await ctl(server.adminUrl, ['keys', 'update', 'tiny']);
    expect([none.code, none.stderr.split('\n')[0]]).toEqual([
      2,
      'error: nothing to change: give at least one of --rpm, --tpm, --max-concurrent, --priority, --models',
    ]);

    const metrics = await (await adminFetch(`${server.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    expect(metrics).toContain('llmgw_rate_limited_total{reason="tpm"} 1');
    expect(metrics).toMatch(/llmgw_replica_saturated\{model="echo",replica="r-[0-9a-f]{8}"\} 0/);
  }, 90_000);
});
