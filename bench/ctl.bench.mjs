// ctl must feel instant: `ctl nodes` against a local server, side by side with a bare
// `node -e 0` start in the same run (the goal is at most 2.5x).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ADMIN, percentile, root, run, stopAll, table, tmp, waitFor } from './lib.mjs';

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
  const bare = [];
  const nodes = [];
  const help = [];
  for (let i = 0; i < 25; i++) {
    bare.push(time(['-e', '0']));
    nodes.push(time([path.join(root, 'packages/ctl/dist/cli.js'), 'nodes']));
    help.push(time([path.join(root, 'packages/ctl/dist/cli.js'), '--help']));
  }
  const med = (a) =>
    percentile(
      a.sort((x, y) => x - y),
      50,
    );
  const b = med(bare);
  console.log('\nctl start-up, 25 alternating runs each (median wall ms)\n');
  console.log(
    table(
      ['command', 'median ms', 'ratio to node -e 0'],
      [
        ['node -e 0', b.toFixed(1), '1.00'],
        ['ctl --help', med(help).toFixed(1), (med(help) / b).toFixed(2)],
        ['ctl nodes (local server)', med(nodes).toFixed(1), (med(nodes) / b).toFixed(2)],
      ],
    ),
  );
  console.log('\nGoal: ctl nodes <= 2.5x node -e 0.');
} finally {
  stopAll();
  setTimeout(() => process.exit(0), 500);
}
