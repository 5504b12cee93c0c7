import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KeyCreated, ReplicaView } from '@llmgw/shared';
import { ADMIN_TOKEN, adminFetch, cleanup, ctlJson, eventually, removeTmp, startAgent, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Journey (issue 31): one base model, twelve LoRA adapters, two replicas of four adapter
 * slots each, and Zipf traffic through the gateway. Every request is served by the
 * adapter it names; routing by adapter loads adapters far less often than routing that
 * ignores them (a second model, `adapter_routing: none` with `routing: least-loaded`,
 * in the same run), and the gateway's count of loads is what the engines did.
 */

const ADAPTERS = 12;
const REQUESTS = 1000;
const CONCURRENCY = 4;
/**
 * The Zipf exponent. At s = 1.1 no routing meets the issue's 60 loads per 1,000: with 8
 * slots for 12 adapters even a clairvoyant placement of the 8 most asked for leaves
 * ranks 9-12 (10.8% of requests) a load each, and LRU slots measure ~157 (see
 * bench/adapters.bench.mjs, which runs s = 1.1). 60 per 1,000 is reachable from s ~ 1.8.
 */
const ZIPF_S = 2;

const names = (prefix: string) => Array.from({ length: ADAPTERS }, (_, i) => `${prefix}${i}`);
const model = (name: string, prefix: string, extra: string) => `  - name: ${name}
    source: test
    scaling: { min: 2, max: 2 }
${extra}    adapters:
${names(prefix)
  .map((a) => `      - { name: ${a}, source: /adapters/${a}.gguf }`)
  .join('\n')}
    profiles:
      - name: cpu
        engine: command
        max_loaded_adapters: 4
        command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --lora, "{adapters}", --max-loras, "{max_loaded_adapters}", --lora-load-ms, "20", --max-tokens-default, "4"]
`;
const catalog = `models:
${model('lora', 'a', '')}${model('lora-ll', 'b', '    routing: least-loaded\n    adapter_routing: none\n')}`;

/** mulberry32: the same traffic on every run. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` adapter indexes drawn from Zipf(s) over `n`. */
function zipf(n: number, s: number, count: number, seed: number): number[] {
  const w = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** s);
  const sum = w.reduce((a, b) => a + b, 0);
  let c = 0;
  const cdf = w.map((x) => (c += x / sum));
  const r = prng(seed);
  return Array.from({ length: count }, () => {
    const u = r();
    const i = cdf.findIndex((x) => u <= x);
    return i < 0 ? n - 1 : i;
  });
}

let server: ServerProc;
let secret: string;

beforeAll(async () => {
  const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(file, catalog);
  server = await startServer({ catalog: file });
  startAgent({ server: server.adminUrl, nodeId: 'cpu-1', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
  await eventually(
    async () => {
      const rs = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
      return rs.length === 4 && rs.every((r) => r.state === 'ready');
    },
    40_000,
    'four ready replicas',
  );
  secret = (await ctlJson<KeyCreated>(server.adminUrl, ['keys', 'create', '--name', 'app'])).secret;
}, 60_000);

afterAll(async () => {
  await cleanup();
  removeTmp();
});

/** Sends `traffic` (adapter names) at CONCURRENCY; returns the failures, and the replies not from the adapter asked for. */
async function drive(traffic: readonly string[]): Promise<{ failed: string[]; wrong: string[] }> {
  const failed: string[] = [];
  const wrong: string[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < traffic.length; i = next++) {
      const adapter = traffic[i]!;
      const res = await fetch(`${server.clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: adapter, messages: [{ role: 'user', content: `request ${i}` }] }),
      });
      const text = await res.text();
      if (res.status !== 200) {
        failed.push(`${adapter}: ${res.status} ${text}`);
        continue;
      }
      const reply = JSON.parse(text) as { model?: string; choices?: Array<{ message?: { content?: string } }> };
      if (reply.model !== adapter || reply.choices?.[0]?.message?.content?.startsWith(`echo(${adapter}):`) !== true) wrong.push(`${adapter}: ${text}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { failed, wrong };
}

/** Sum of a counter's samples whose labels include `match`, from Prometheus text. */
function total(metrics: string, name: string, match: string): number {
  let sum = 0;
  for (const line of metrics.split('\n')) if (line.startsWith(`${name}{`) && line.includes(match)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

describe('LoRA adapters through the gateway', () => {
  it('lists every adapter as a model with its base as parent', async () => {
    const res = await fetch(`${server.clientUrl}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
    const data = ((await res.json()) as { data: Array<{ id: string; parent?: string }> }).data;
    for (const [base, prefix] of [
      ['lora', 'a'],
      ['lora-ll', 'b'],
    ] as const) {
      expect(data.filter((m) => m.parent === base).map((m) => m.id)).toEqual(names(prefix));
      expect(data.find((m) => m.id === base)?.parent).toBeUndefined();
    }
  });

  it('serves Zipf traffic over 12 adapters on 2 replicas x 4 slots: every request, from its adapter, with few loads', async () => {
    const draws = zipf(ADAPTERS, ZIPF_S, REQUESTS, 31);
    // The same draws on both models, one after the other, so neither's replicas are busy with the other's requests.
    const affinity = await drive(draws.map((i) => `a${i}`));
    const ignoring = await drive(draws.map((i) => `b${i}`));
    expect(affinity.failed).toEqual([]);
    expect(ignoring.failed).toEqual([]);
    expect(affinity.wrong).toEqual([]);
    expect(ignoring.wrong).toEqual([]);

    const metrics = await (await adminFetch(`${server.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const loads = total(metrics, 'llmgw_adapter_loads_total', 'model="lora"');
    const baseline = total(metrics, 'llmgw_adapter_loads_total', 'model="lora-ll"');
    // What the engines themselves loaded (their /metrics, unauthenticated like /health).
    const replicas = await ctlJson<ReplicaView[]>(server.adminUrl, ['replicas']);
    const engineLoads = async (m: string) => {
      let sum = 0;
      for (const r of replicas.filter((x) => x.model === m))
        sum += total(await (await fetch(`${r.endpoint!}/metrics`)).text(), 'llmgw_test_engine_adapter_loads_total', '');
      return sum;
    };
    const [engineAffinity, engineIgnoring] = [await engineLoads('lora'), await engineLoads('lora-ll')];
    const figures = { loads, baseline, engineAffinity, engineIgnoring };
    // Printed so a failing run shows all four.
    process.stdout.write(`adapter loads per ${REQUESTS}: ${JSON.stringify(figures)}\n`);
    expect(loads).toBeGreaterThanOrEqual(ADAPTERS / 2);
    expect(loads).toBeLessThanOrEqual((60 * REQUESTS) / 1000);
    expect(loads * 2).toBeLessThanOrEqual(baseline);
    // The gateway's record of the slots is a prediction; with both LRU at the same order it is what the engines did, give or take a request that reached an engine out of the order it was routed in.
    expect(Math.abs(engineAffinity - loads)).toBeLessThanOrEqual(Math.max(3, loads * 0.1));
    expect(Math.abs(engineIgnoring - baseline)).toBeLessThanOrEqual(Math.max(3, baseline * 0.1));
  }, 120_000);
});
