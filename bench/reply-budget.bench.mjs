// Hostile engines at scale (issue 28): 20 clients at once ask for non-streamed replies of
// just under 64 MiB (the per-reply cap), from the test engine's `--fault oversized-event`,
// while `/healthz` is asked on both listeners one request after another. Measured with
// the reply budget at its default (`--reply-buffer` 256 MiB) and, as the baseline in the
// same run, with a budget too large to matter (4 GiB): what the server did before it had
// one (except that large replies' usage is no longer parsed whole in either). Prints the
// /healthz latency (max and p99, per listener), the answers' statuses and the server's
// peak RSS. Goal: /healthz under 200 ms. `--rounds=N` (default 3) bursts of 20.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fleet, percentile, root, serverRequire, stopAll, table } from './lib.mjs';

const undici = serverRequire('undici');
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 3);
const CLIENTS = 20;
const REPLY = 64 * 1024 * 1024 - 4096; // the content; the JSON around it keeps the reply under 64 MiB
const engine = `[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}", --fault, oversized-event, --fault-bytes, "${REPLY}"]`;
const catalog = `models:\n  - name: big\n    source: t\n    profiles:\n      - { name: cpu, engine: command, command: ${engine} }\n`;

/** `healthz-poll.mjs` on `url` in a process of its own; `stop()` resolves with its latencies in ms. */
function poll(url, ca) {
  const child = spawn(process.execPath, [path.join(root, 'bench/healthz-poll.mjs'), url, ...(ca ? [ca] : [])], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const exited = new Promise((r) => child.once('exit', r));
  return {
    stop: async () => {
      child.stdin.end();
      await exited;
      return JSON.parse(out);
    },
  };
}

const peakRss = (pid) => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

async function measure(label, extraArgs) {
  const f = await fleet(catalog, { extraArgs });
  const clientPool = new undici.Pool(f.clientUrl, { connections: CLIENTS + 2 });
  const rssBefore = peakRss(f.serverPid);
  const polls = [poll(`${f.clientUrl}/healthz`), poll(`${f.adminUrl}/healthz`, path.join(f.dataDir, 'tls', 'ca.pem'))];
  // Both pollers under way before the load starts; the first 3 s, idle, are the noise floor.
  await new Promise((r) => setTimeout(r, 3000));
  const loadFrom = Date.now();
  const statuses = {};
  for (let r = 0; r < rounds; r++) {
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        const res = await clientPool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { authorization: `Bearer ${f.secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'big', messages: [{ role: 'user', content: 'hi' }] }),
        });
        let bytes = 0;
        for await (const c of res.body) bytes += c.length;
        const k = `${res.statusCode}${res.statusCode === 200 && bytes < REPLY ? ' (short)' : ''}`;
        statuses[k] = (statuses[k] ?? 0) + 1;
      }),
    );
  }
  const samples = await Promise.all(polls.map((p) => p.stop()));
  const sorted = (xs) => xs.map(([, ms]) => ms).sort((a, b) => a - b);
  const stats = samples.map((s) => sorted(s.filter(([at]) => at >= loadFrom)));
  const idle = samples.map((s) => sorted(s.filter(([at]) => at < loadFrom)));
  const rss = peakRss(f.serverPid);
  await clientPool.close();
  stopAll();
  await new Promise((r) => setTimeout(r, 1000));
  return { label, stats, idle, statuses, rssBefore, rss };
}

const results = [];
try {
  results.push(await measure('--reply-buffer 256 MiB (default)', []));
  results.push(await measure('--reply-buffer 4 GiB (no budget: baseline)', ['--reply-buffer', String(4 * 1024 ** 3)]));
} finally {
  stopAll();
}
console.log(`\n${CLIENTS} concurrent non-streamed replies of ~64 MiB, ${rounds} rounds; /healthz asked one at a time on each listener meanwhile\n`);
console.log(
  table(
    ['server', '/healthz client max', 'client p99', '/healthz admin max', 'admin p99', 'answers', 'peak RSS MB (before)'],
    results.flatMap((r) => [
      [
        `${r.label}: idle, before the load`,
        `${r.idle[0].at(-1).toFixed(0)} ms`,
        `${percentile(r.idle[0], 99).toFixed(0)} ms`,
        `${r.idle[1].at(-1).toFixed(0)} ms`,
        `${percentile(r.idle[1], 99).toFixed(0)} ms`,
        '-',
        '-',
      ],
      [
        r.label,
        `${r.stats[0].at(-1).toFixed(0)} ms`,
        `${percentile(r.stats[0], 99).toFixed(0)} ms`,
        `${r.stats[1].at(-1).toFixed(0)} ms`,
        `${percentile(r.stats[1], 99).toFixed(0)} ms`,
        JSON.stringify(r.statuses),
        `${r.rss.toFixed(0)} (${r.rssBefore.toFixed(0)})`,
      ],
    ]),
  ),
);
console.log('Goal: /healthz under 200 ms on both listeners.');
process.exit(0);
