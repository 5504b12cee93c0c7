import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, ReplicaView } from '@llmgw/shared';
import { ADMIN_TOKEN, adminFetch, cleanup, ctl, ctlJson, eventually, removeTmp, rows, startAgent, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Journey: an application developer gets a key from the operator and uses llmgw with the
 * official OpenAI SDK: lists models, chats, streams, embeds; errors arrive as the SDK's
 * own exception classes; a replica dying under load or a broken model loses nothing.
 */

const engine = (extra: string[] = []) =>
  `[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"${extra.map((e) => `, "${e}"`).join('')}]`;

const catalog = `models:
  - name: echo
    aliases: [chat]
    source: test
    scaling: { min: 2, max: 2 }
    profiles:
      - { name: cpu, engine: command, command: ${engine(['--token-delay-ms', '20'])} }
  - name: slow
    source: test
    profiles:
      - { name: cpu, engine: command, command: ${engine(['--token-delay-ms', '50', '--max-tokens-default', '200'])} }
  - name: solo
    source: test
    fallbacks: [backup]
    profiles:
      - { name: cpu, engine: command, command: ${engine(['--fail-status', '500'])} }
  - name: backup
    source: test
    profiles:
      - { name: cpu, engine: command, command: ${engine()} }
  - name: huge
    source: test
    profiles:
      - { name: cpu, engine: command, min_memory_gb: 999, command: ${engine()} }
`;

let server: ServerProc;
let stateDir: string;
let secret: string;
let client: OpenAI;

beforeAll(async () => {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(file, catalog);
  server = await startServer({ catalog: file });
  const agent = startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
  stateDir = agent.stateDir;
  await eventually(
    async () => {
      const rs = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
      return rs.length === 5 && rs.every((r) => r.state === 'ready');
    },
    40_000,
    'five ready replicas',
  );
  secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
  client = new OpenAI({ apiKey: secret, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

describe('the OpenAI SDK through the gateway', () => {
  it('lists models with aliases, chats, streams with usage and embeds', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    expect(models.sort()).toEqual(['backup', 'chat', 'echo', 'huge', 'slow', 'solo']);

    const chat = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi there' }] });
    expect(chat.choices[0]!.message.content).toBe('echo: hi there');
    expect(chat.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 3 });

    const stream = await client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'one two' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('echo: one two');
    expect(usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });

    // Usage is requested upstream for accounting but not shown to a client that did not ask.
    const plain = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }], stream: true });
    let sawUsage = false;
    for await (const chunk of plain) if (chunk.usage) sawUsage = true;
    expect(sawUsage).toBe(false);

    const emb = await client.embeddings.create({ model: 'echo', input: ['a', 'b'] });
    expect(emb.data).toHaveLength(2);
    const norm = Math.hypot(...emb.data[0]!.embedding);
    expect(norm).toBeCloseTo(1, 5);

    const usageRows = await ctlJson<{ key_name: string; model: string; completion_tokens: number }[]>(server.adminUrl, ['usage']);
    expect(usageRows.find((u) => u.key_name === 'app' && u.model === 'echo')!.completion_tokens).toBeGreaterThanOrEqual(6);
  });

  it('sends a repeated system prompt back to the replica that has it cached (cache-aware, the default), as ctl models and /metrics say', async () => {
    const system = 'You are a terse assistant for the llmgw test suite. '.repeat(60);
    const replicas = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const { response } = await client.chat.completions
        .create({
          model: 'echo',
          max_tokens: 2,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: `question ${i}` },
          ],
        })
        .withResponse();
      replicas.add(response.headers.get('x-llmgw-replica') ?? '');
    }
    expect(replicas.size).toBe(1);
    expect(rows((await ctl(server.adminUrl, ['models'])).stdout).get('echo')?.ROUTING).toBe('cache-aware');
    const metrics = await (await adminFetch(`${server.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    expect(metrics).toMatch(/llmgw_routing_decisions_total\{model="echo",replica="[^"]+",decision="kept"\} 5/);
  });

  it("raises the SDK's own errors: no key, unknown model, rate limit, no replica", async () => {
    const anon = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    await expect(anon.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
    const missing = client.chat.completions.create({ model: 'ecko', messages: [{ role: 'user', content: 'x' }] });
    await expect(missing).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(missing).rejects.toThrow(/did you mean `echo`/);

    // Six at once against --rpm 5: exactly one is refused, however they interleave.
    const limited = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'limited', '--rpm', '5'])).secret;
    const lc = new OpenAI({ apiKey: limited, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => lc.embeddings.create({ model: 'echo', input: 'x' })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    expect(refused[0]!.reason).toBeInstanceOf(OpenAI.RateLimitError);

    // A key limited to one model is refused the others.
    const narrow = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'narrow', '--models', 'backup'])).secret;
    const nc = new OpenAI({ apiKey: narrow, baseURL: `${server.clientUrl}/v1`, maxRetries: 0 });
    await expect(nc.embeddings.create({ model: 'echo', input: 'x' })).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);

    // A model that cannot be placed: 503 with the placement summary, which the SDK may retry.
    const huge = client.chat.completions.create({ model: 'huge', messages: [{ role: 'user', content: 'x' }] });
    await expect(huge).rejects.toMatchObject({ status: 503 });
    await expect(huge).rejects.toThrow(/has 32 GiB of memory, needs 999/);

    // Revoked keys stop at once.
    const keys = await ctlJson<{ id: string; name: string }[]>(server.adminUrl, ['keys', 'list']);
    expect((await ctl(server.adminUrl, ['keys', 'revoke', keys.find((k) => k.name === 'narrow')!.id])).code).toBe(0);
    await expect(nc.embeddings.create({ model: 'backup', input: 'x' })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('serves a broken model from its fallback and says so', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    expect(response.headers.get('x-llmgw-model')).toBe('backup');
    expect(data.choices[0]!.message.content).toBe('echo: hello');
  });

  it('loses no non-streaming request when one of two replicas dies under load', async () => {
    const replicas = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'echo']);
    expect(replicas.filter((r) => r.state === 'ready')).toHaveLength(2);
    const victim = replicas[0]!.shards[0]!.pid!;
    let killed = false;
    const outcomes: string[] = [];
    const worker = async () => {
      for (let i = 0; i < 12; i++) {
        try {
          const r = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'a b c d' }] });
          outcomes.push(r.choices[0]!.message.content ?? '');
        } catch (e) {
          outcomes.push(`error: ${(e as Error).message}`);
        }
        if (!killed && outcomes.length >= 20) {
          killed = true;
          process.kill(victim, 'SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expect(killed).toBe(true);
    expect(outcomes.filter((o) => o.startsWith('error'))).toEqual([]);
    expect(outcomes).toHaveLength(96);
  });

  it('aborts the engine’s generation when the client leaves mid-stream', async () => {
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: 'slow',
        messages: [{ role: 'user', content: 'go' }],
        stream: true,
        max_tokens: 200,
        min_tokens: 200,
      } as OpenAI.ChatCompletionCreateParamsStreaming,
      { signal: abort.signal },
    );
    let chunks = 0;
    try {
      for await (const _ of stream) {
        if (++chunks === 3) abort.abort();
      }
    } catch {
      /* the SDK reports the abort */
    }
    const slow = (await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas', '--model', 'slow']))[0]!;
    const log = path.join(stateDir, 'logs', `${slow.shards[0]!.id}.log`);
    const line = await eventually(
      () => fs.readFileSync(log, 'utf8').match(/cancelled \S+ after (\d+)\/(\d+) tokens: client disconnected/) ?? undefined,
      5000,
      'cancel line',
    );
    // 50 ms per token: a cancel that took 100 ms would show at most two more tokens than the client saw.
    expect(Number(line[1])).toBeLessThanOrEqual(chunks + 2);
    expect(Number(line[2])).toBe(200);
  });
});
