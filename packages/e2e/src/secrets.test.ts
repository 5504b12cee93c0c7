import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, NodeView, ReplicaView, TokenCreated } from '@llmgw/shared';
import { adminFetch, bins, cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journeys for what an operator's neighbours must not see or do: engine keys on command
 * lines, in logs or in the database; a data directory others can read; a dashboard
 * reader or Prometheus holding more power than it needs.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const mode = (f: string) => fs.statSync(f).mode & 0o777;

function catalogFile(text: string): string {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(file, text);
  return file;
}

// A profile from before keys went by environment (`--api-key {api_key}`), around an
// engine that prints its key at start, as vLLM prints its settings.
// The template's trailing arguments reach the engine ("$@"), as they did before.
const blabbing = `["/bin/sh", "-c", "echo settings: api_key=$LLMGW_ENGINE_API_KEY; exec '${process.execPath}' '${bins.testEngine}' --host {host} --port {port} --model {model} \\"$@\\"", "sh", "--api-key", "{api_key}"]`;

describe('engine keys stay secret', () => {
  it('ps never shows an engine key, logs mask it, the database has none; data dir 0700, database 0600', async () => {
    // An existing data directory others can read is tightened at start, and the log says so.
    const dataDir = path.join(tmpDir('llmgw-secrets-'), 'data');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    const server = await startServer({
      dataDir,
      catalog: catalogFile(
        `models:\n  - name: echo\n    source: t\n    profiles:\n      - { name: cpu, engine: command, min_memory_gb: 1, command: ${blabbing} }\n`,
      ),
    });
    const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-a', args: ['--stop-engines-on-exit'] });
    const replica = await eventually(
      async () => (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--show-keys'])).find((r) => r.state === 'ready'),
      30_000,
      'ready',
    );
    const key = replica.api_key!;
    const pid = replica.shards[0]!.pid!;
    expect(key).toMatch(/^sk-llmgw-engine-/);

    // Client traffic works: the gateway holds the key the engine was given.
    const secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
    const client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    const reply = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.choices[0]?.message.content).toBe('echo: hi');

    // Every local user sees every command line; the key is only in the engine's environment.
    const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(ps).toContain(bins.testEngine);
    expect(ps).not.toContain(key);
    // sh execs the engine, so the shard's pid is the engine's.
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    expect(cmdline).toContain(bins.testEngine);
    expect(cmdline).not.toContain(key);
    expect(fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')).toContain(`LLMGW_ENGINE_API_KEY=${key}`);

    // The engine printed its key; ctl logs, the agent's and the server's logs mask it.
    const logs = await eventually(
      async () => {
        const r = await ctl(server.adminUrl, ['logs', replica.id]);
        return r.stdout.includes('settings:') && r;
      },
      15_000,
      'engine log',
    );
    expect(logs.stdout).toContain('settings: api_key=***');
    expect(logs.stdout).not.toContain(key);
    expect(agent.output()).not.toContain(key);
    expect(server.output()).not.toContain(key);
    expect(server.output()).toMatch(/"was":"0755","now":"0700".*data directory was readable by others; tightened it to 0700/);

    // The store holds no engine key, and nothing in the data directory is readable by others.
    expect(mode(dataDir)).toBe(0o700);
    for (const f of fs.readdirSync(dataDir, { recursive: true }).map(String)) {
      const file = path.join(dataDir, f);
      if (fs.statSync(file).isDirectory()) {
        expect([f, mode(file)]).toEqual([f, 0o700]);
        continue;
      }
      // Certificates are public by design (agents and browsers are given them); private keys are not.
      const certificate = /^tls\/[^/]*\.pem$/.test(f) && !f.includes('key');
      if (!certificate) expect([f, mode(file)]).toEqual([f, 0o600]);
      expect([f, fs.readFileSync(file).includes(key)]).toEqual([f, false]);
    }
    // The harness gives the tokens by environment, so no token files here.
    expect(fs.readdirSync(dataDir)).toEqual(expect.arrayContaining(['llmgw.db', 'llmgw.db-wal', 'engine-key-secret']));
  }, 90_000);
});

describe('tokens with roles', () => {
  it('a viewer lists nodes but cannot cordon; a metrics token scrapes /metrics and nothing else', async () => {
    const server = await startServer();
    startAgent({ server: server.adminUrl, nodeId: 'cpu-a' });
    await eventually(async () => (await ctlJson<NodeView[]>(server.adminUrl, ['nodes'])).length === 1, 15_000, 'node joined');

    const viewer = await ctlJson<TokenCreated>(server.adminUrl, ['tokens', 'create', '--name', 'grafana', '--role', 'viewer']);
    const metrics = await ctlJson<TokenCreated>(server.adminUrl, ['tokens', 'create', '--name', 'prometheus', '--role', 'metrics']);
    expect(viewer.secret).toMatch(/^llmgw-viewer-/);
    const as = (token: string) => ({ LLMGW_ADMIN_TOKEN: token });

    const nodes = await ctl(server.adminUrl, ['nodes'], as(viewer.secret));
    expect(nodes.code).toBe(0);
    expect(nodes.stdout).toContain('cpu-a');

    const cordon = await ctl(server.adminUrl, ['cordon', 'cpu-a'], as(viewer.secret));
    expect(cordon.code).toBe(1);
    expect(cordon.stdout).toBe('');
    expect(cordon.stderr).toBe(
      'error: viewer token "grafana" may only read; POST /api/v1/nodes/cpu-a/state needs an admin token (ctl tokens create --role admin)\n',
    );
    const still = await ctlJson<NodeView[]>(server.adminUrl, ['nodes']);
    expect(still[0]!.state).toBe('ready');

    const scrape = await adminFetch(`${server.adminUrl}/metrics`, { headers: { authorization: `Bearer ${metrics.secret}` } });
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toContain('llmgw_');
    expect((await adminFetch(`${server.adminUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${metrics.secret}` } })).status).toBe(403);
    const asMetrics = await ctl(server.adminUrl, ['nodes'], as(metrics.secret));
    expect([asMetrics.code, asMetrics.stderr.trimEnd().split('\n')]).toEqual([
      1,
      [expect.stringContaining('metrics token "prometheus" may only scrape /metrics')],
    ]);

    // Listed without secrets; revoked, it stops at once.
    const list = await ctl(server.adminUrl, ['tokens', 'list']);
    expect(list.stdout).toMatch(/grafana\s+viewer/);
    expect(list.stdout).not.toContain(viewer.secret);
    expect((await ctl(server.adminUrl, ['tokens', 'revoke', viewer.token.id])).stdout).toBe(`token/${viewer.token.id} revoked\n`);
    const after = await ctl(server.adminUrl, ['nodes'], as(viewer.secret));
    expect(after.code).toBe(1);
    expect(after.stderr).toContain('the token was revoked');
  }, 60_000);
});
