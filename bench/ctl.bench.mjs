// ctl must feel instant: `ctl nodes` against a local server, side by side with a bare
// `node -e 0` start in the same run (the goal is at most 2.0x, issue 32).
//
//   node bench/ctl.bench.mjs [--runs=N] [--baseline=PATH]
//
// --baseline (or LLMGW_BENCH_CTL_BASELINE) is another build of ctl to time in the same
// runs: its dist/cli.js, or a built checkout holding packages/ctl/dist/cli.js. Made once:
//   git worktree add --detach /tmp/llmgw-base REV && (cd /tmp/llmgw-base && pnpm install && pnpm build)
// or, since main's ctl was one self-contained file, a copy of that file.
// Every command of a run is timed once in turn (bare, then each build), so the machine's
// drift falls on all of them alike.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ADMIN, percentile, root, run, stopAll, table, tmp, waitFor } from './lib.mjs';

const arg = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const runs = Number(arg('runs') ?? 25);
if (!Number.isInteger(runs) || runs < 1) {
  console.error('ctl.bench: --runs must be a positive integer');
  process.exit(2);
}
const tree = path.join(root, 'packages/ctl/dist/cli.js');
let baseline = arg('baseline') ?? process.env.LLMGW_BENCH_CTL_BASELINE;
if (baseline && fs.existsSync(baseline) && fs.statSync(baseline).isDirectory()) baseline = path.join(baseline, 'packages/ctl/dist/cli.js');
if (baseline && !fs.existsSync(baseline)) {
  console.error(`ctl.bench: no ctl build at ${baseline}`);
  process.exit(2);
}

const dataDir = path.join(tmp('llmgw-ctl-bench-'), 'server');
const server = run(path.join(root, 'packages/server/dist/main.js'), ['--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0', '--data-dir', dataDir], {
  env: { LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: 'j' },
});
try {
  const url = (await waitFor(async () => server.output().match(/"admin":"(https?:[^"]+)"/), 'server'))[1];
  // Over TLS, as an operator's ctl talks to a default server: the handshake is part of the time.
  const env = { ...process.env, LLMGW_SERVER: url, LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_CA: path.join(dataDir, 'tls', 'ca.pem'), NO_COLOR: '1' };
  const time = (args) => {
    const t = process.hrtime.bigint();
    execFileSync(process.execPath, args, { env, stdio: 'ignore' });
    return Number(process.hrtime.bigint() - t) / 1e6;
  };
  const rows = [{ name: 'node -e 0', args: ['-e', '0'] }];
  const builds = [['this tree', tree], ...(baseline ? [['baseline', baseline]] : [])];
  for (const [name, cli] of builds) {
    rows.push({ name: `ctl --help (${name})`, args: [cli, '--help'] }, { name: `ctl nodes (${name})`, args: [cli, 'nodes'] });
  }
  // One uncounted warm-up of each (the file cache, the server's first TLS session).
  for (const r of rows) time(r.args);
  for (const r of rows) r.ms = [];
  for (let i = 0; i < runs; i++) for (const r of rows) r.ms.push(time(r.args));
  for (const r of rows) r.ms.sort((x, y) => x - y);
  const bare = percentile(rows[0].ms, 50);
  console.log(`\nctl start-up, ${runs} interleaved runs each (wall ms)\n`);
  console.log(
    table(
      ['command', 'median ms', 'p90 ms', 'median / node -e 0'],
      rows.map((r) => [r.name, percentile(r.ms, 50).toFixed(1), percentile(r.ms, 90).toFixed(1), (percentile(r.ms, 50) / bare).toFixed(2)]),
    ),
  );
  if (!baseline) console.log('\nNo --baseline: main at 90d8886, before ctl loaded only what a command uses, measured 2.31-2.75x for ctl nodes (issue 32).');
  console.log('\nGoal: ctl nodes <= 2.0x node -e 0.');
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 500);
}
