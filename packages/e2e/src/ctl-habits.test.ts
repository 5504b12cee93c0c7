import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NodeView, ReplicaView } from '@llmgw/shared';
import { ADMIN_TOKEN, bins, cleanup, ctl, ctlJson, eventually, removeTmp, root, run, startAgent, startServer, tmpDir } from './harness.js';

/**
 * ctl as a kubectl user drives it (issue 14), the real binary as a subprocess: usage
 * errors exit 2 in two lines, a bad setup names its cause, a second cordon keeps its
 * reason, logs -f follows, a stuck drain reports progress and gives up at --timeout.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const engine = '[llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]';
const lines = (s: string) => s.trimEnd().split('\n');

describe('ctl habits', () => {
  it('usage errors, bad setups, version, cordon twice, logs -f and a stuck drain', async () => {
    const catalog = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    // Needs 30 GB: only roomy fits it, so a drain of roomy cannot move it anywhere.
    fs.writeFileSync(
      catalog,
      `models:\n  - name: big\n    source: t\n    profiles:\n      - { name: cpu, engine: command, min_memory_gb: 30, command: ${engine} }\n`,
    );
    const server = await startServer({ catalog, args: ['--min-healthy', '1'] });
    const url = server.adminUrl;
    startAgent({ server: url, nodeId: 'roomy', proc: 'cpu-32gb', args: ['--stop-engines-on-exit'] });
    startAgent({ server: url, nodeId: 'small', proc: 'cpu-8gb', args: ['--stop-engines-on-exit'] });

    // Usage errors: exit 2, the error and a --help hint, nothing else.
    for (const [args, first, hint] of [
      [['nodez'], "error: unknown command 'nodez' (did you mean nodes?)", "run 'ctl --help' for usage"],
      [['drain'], "error: missing required argument 'node'", "run 'ctl drain --help' for usage"],
      [['nodes', '--bogus'], "error: unknown option '--bogus'", "run 'ctl nodes --help' for usage"],
      [
        ['-o', 'yaml', 'nodes'],
        "error: option '-o, --output <format>' argument 'yaml' is invalid. Allowed choices are table, wide, json.",
        "run 'ctl --help' for usage",
      ],
      [['drain', 'roomy', '--timeout', 'soon'], 'error: invalid --timeout "soon": want a duration like 90s, 10m or 2h', "run 'ctl drain --help' for usage"],
    ] as const) {
      const r = await ctl(url, [...args]);
      expect([args, r.code, lines(r.stderr), r.stdout]).toEqual([args, 2, [first, hint], '']);
    }
    const help = await ctl(url, ['drain', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--timeout <duration> .*\(default: "30m"\)/s);
    expect(help.stdout).toMatch(/Examples:\n {2}\$ ctl drain gpu-3/);
    expect(help.stdout).toContain('Exit codes: 0 done, 1 the server refused or the operation did not finish, 2 usage');

    // Bad setups, each with its real cause.
    const atClient = await ctl(server.clientUrl, ['nodes']);
    expect([atClient.code, lines(atClient.stderr)]).toEqual([
      1,
      [expect.stringContaining(`${server.clientUrl} is llmgw's client (OpenAI-compatible) address, not its admin API`)],
    ]);
    const noScheme = await ctl(url.replace(/^https:\/\//, ''), ['nodes']);
    expect([noScheme.code, lines(noScheme.stderr)[0]]).toEqual([
      2,
      `error: invalid LLMGW_SERVER "${url.replace(/^https:\/\//, '')}": a URL needs its scheme: ${url}`,
    ]);
    const home = tmpDir('llmgw-wrong-home-');
    const wrongHome = await ctl(url, ['nodes'], { LLMGW_ADMIN_TOKEN: '', LLMGW_HOME: home });
    expect([wrongHome.code, lines(wrongHome.stderr)[0]]).toEqual([
      2,
      expect.stringContaining(`error: no admin token: no token file at ${path.join(home, 'server', 'admin-token')}`),
    ]);

    const pkg = (dir: string) => (JSON.parse(fs.readFileSync(path.join(root, 'packages', dir, 'package.json'), 'utf8')) as { version: string }).version;
    const version = await ctl(url, ['version']);
    expect(lines(version.stdout)).toEqual([
      `Client Version: ${pkg('ctl')} (Node.js ${process.version})`,
      `Server Version: ${pkg('server')} (Node.js ${process.version}) at ${url}`,
    ]);

    // A second cordon without --reason keeps the first reason, and says so.
    expect((await ctl(url, ['cordon', 'small', '--reason', 'disk check'])).stdout).toBe('node/small cordoned\n');
    expect((await ctl(url, ['cordon', 'small'])).stdout).toBe('node/small already cordoned (reason: disk check)\n');
    expect((await ctlJson<NodeView[]>(url, ['nodes'])).find((n) => n.id === 'small')).toMatchObject({ state: 'cordoned', state_reason: 'disk check' });

    const replica = await eventually(async () => (await ctlJson<ReplicaView[]>(url, ['replicas'])).find((r) => r.state === 'ready'), 30_000, 'ready');

    // logs -f prints the tail, then lines as they come (the agent's health probes log).
    const follow = run(bins.ctl, ['logs', '-f', replica.id], {
      LLMGW_SERVER: url,
      LLMGW_ADMIN_TOKEN: ADMIN_TOKEN,
      LLMGW_CA: server.caFile!,
      LLMGW_HOME: tmpDir('llmgw-home-'),
    });
    await eventually(() => follow.output().split('\n').length > 2 && follow.output(), 10_000, 'a tail');
    const first = follow.output();
    const grown = await eventually(() => follow.output().length > first.length && follow.output(), 15_000, 'new lines');
    // What was printed stays printed: new lines are added below it, none repeated.
    expect(grown.startsWith(first)).toBe(true);
    await follow.stop('SIGINT');

    // A drain that cannot progress: a status line, then the elapsed time, then exit 1 at --timeout.
    const drain = await ctl(url, ['drain', 'roomy', '--timeout', '3s', '--progress-every', '1s']);
    expect(drain.code).toBe(1);
    expect(drain.stdout).toBe('node/roomy draining\n');
    const err = lines(drain.stderr);
    expect(err[0]).toMatch(new RegExp(`^ {2}1 replica left: ${replica.id} \\(big\\) cannot move: `));
    expect(err.slice(1, -1).length).toBeGreaterThanOrEqual(2);
    for (const l of err.slice(1, -1)) expect(l).toMatch(/^ {2}still draining after \ds: 1 replica left: .* cannot move: /);
    expect(err.at(-1)).toMatch(/^error: node roomy still holds 1 shard\(s\) after 3s: 1 replica left: .*cannot move: .*\(the drain goes on; see ctl nodes\)$/);
    expect((await ctl(url, ['drain', 'roomy', '--no-wait'])).stdout).toBe('node/roomy already draining\n');
  }, 60_000);
});
