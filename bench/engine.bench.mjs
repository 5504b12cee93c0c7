// The built-in CPU engine (node-llama-cpp on the generated test GGUF): tokens/s
// straight to the engine and through the gateway, alternating in one run, and how long
// a replica takes from `starting` to `ready` as ctl sees it. The engine (through its
// agent) is pinned to core 1 and the gateway to core 0 where taskset exists, so they do
// not take turns on one core.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { ADMIN, Pool, admin, percentile, root, run, serverTrust, stopAll, table, tmp, waitFor } from './lib.mjs';
import fs from 'node:fs';

const dir = tmp('llmgw-engine-bench-');
const model = path.join(dir, 'tiny.gguf');
execFileSync(process.execPath, [path.join(root, 'packages/agent/dist/main.js'), 'make-test-model', '--out', model]);
fs.writeFileSync(
  path.join(dir, 'catalog.yaml'),
  `models:\n  - name: tiny\n    source: ${model}\n    profiles:\n      - { name: cpu, engine: node-llama-cpp }\n`,
);
const env = { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: 'j', LLMGW_LOG_LEVEL: 'warn' };

try {
  const server = run(
    path.join(root, 'packages/server/dist/main.js'),
    [
      '--admin-addr',
      '127.0.0.1:0',
      '--client-addr',
      '127.0.0.1:0',
      '--data-dir',
      path.join(dir, 'server'),
      '--catalog',
      path.join(dir, 'catalog.yaml'),
      '--reconcile-interval',
      '1',
      '--log-level',
      'info',
    ],
    { env, core: 0 },
  );
  const m = await waitFor(async () => server.output().match(/"admin":"(https?:[^"]+)","client":"(https?:[^"]+)"/), 'server');
  const [adminUrl, clientUrl] = [m[1], m[2]];
  const { joinToken } = serverTrust(path.join(dir, 'server'), adminUrl);
  const fixtures = path.join(root, 'packages/agent/test/fixtures');
  run(
    path.join(root, 'packages/agent/dist/main.js'),
    [
      '--server',
      adminUrl,
      '--node-id',
      'bench',
      '--nvidia-smi',
      '/nonexistent',
      '--proc-root',
      path.join(fixtures, 'proc/cpu-32gb'),
      '--sys-root',
      path.join(fixtures, 'sys/empty'),
      '--state-dir',
      path.join(dir, 'agent'),
      '--heartbeat-interval',
      '1',
      '--engine-host',
      '127.0.0.1',
      '--stop-engines-on-exit',
      // As in lib.mjs's fleet: the engine runs as whoever runs the bench, root included.
      '--engine-user',
      process.env.LLMGW_ENGINE_USER || os.userInfo().username,
    ],
    { env: { ...env, LLMGW_JOIN_TOKEN: joinToken }, core: 1 },
  );

  // Starting to ready, as an operator polling ctl replicas would see it.
  let startingAt;
  let replica;
  const t0 = Date.now();
  for (;;) {
    const [r] = await admin(adminUrl, '/replicas?show_keys=true').catch(() => []);
    if (r?.state === 'starting' && startingAt === undefined) startingAt = Date.now();
    if (r?.state === 'ready') {
      replica = r;
      break;
    }
    if (Date.now() - t0 > 120_000) throw new Error('no ready replica in 120 s');
    await new Promise((res) => setTimeout(res, 50));
  }
  const readyMs = Date.now() - (startingAt ?? t0);
  const key = (await admin(adminUrl, '/keys', { method: 'POST', body: JSON.stringify({ name: 'bench' }) })).secret;

  const body = (n) =>
    JSON.stringify({
      model: 'tiny',
      stream: true,
      max_tokens: n,
      seed: 1,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Tell me a story' }],
    });
  async function tokensPerSecond(pool, auth, n) {
    const t = process.hrtime.bigint();
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
      body: body(n),
    });
    let text = '';
    for await (const c of res.body) text += c;
    const usage = JSON.parse(
      text
        .split('\n\n')
        .filter((e) => e.includes('"usage":{'))
        .pop()
        .slice(6),
    ).usage;
    return usage.completion_tokens / (Number(process.hrtime.bigint() - t) / 1e9);
  }
  const direct = new Pool(replica.endpoint);
  const gw = new Pool(clientUrl);
  await tokensPerSecond(direct, replica.api_key, 50);
  await tokensPerSecond(gw, key, 50);
  const d = [];
  const g = [];
  for (let i = 0; i < 8; i++) {
    d.push(await tokensPerSecond(direct, replica.api_key, 300));
    g.push(await tokensPerSecond(gw, key, 300));
  }
  const med = (a) =>
    percentile(
      a.sort((x, y) => x - y),
      50,
    );
  console.log('\nBuilt-in CPU engine (test GGUF, 300-token streams, 8 alternating runs each; medians)\n');
  console.log(
    table(
      ['measure', 'value'],
      [
        ['tokens/s, engine direct', med(d).toFixed(0)],
        ['tokens/s, through the gateway', med(g).toFixed(0)],
        ['gateway / direct', `${((med(g) / med(d)) * 100).toFixed(1)} %`],
        ['replica starting -> ready (ms, polled every 50 ms)', String(readyMs)],
      ],
    ),
  );
  console.log('\nGoal: the gateway lowers tokens/s by no more than 2 %.');
  await direct.close();
  await gw.close();
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 1500);
}
