import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { eventually, freePort, removeTmp, root, tmpDir } from './harness.js';
import { examples, match, substitute } from './readme-doc.js';

/**
 * The README, tested: the marked examples of its quick start and ctl sections (see
 * readme-doc.ts), run in order by bash as a new user types them in a second terminal,
 * against one live instance that the real launcher (`node scripts/local.mjs`, what
 * `pnpm start` runs after its build) started. The user's HOME is a temporary directory,
 * so `~/.llmgw` is that instance's home, as the README says; only the ports differ from
 * the defaults (8080/8081 may be taken), so the shell gets the `export LLMGW_SERVER=…`
 * line the banner prints, and the README's 127.0.0.1:8080/8081 are rewritten to the
 * instance's in commands and back in what they print.
 */

const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const all = examples(readme);
const home = tmpDir('llmgw-readme-home-');
let launcher: ChildProcess | undefined;

/** Every process whose command line names `dir`: the launcher's children all do. */
function processesUnder(dir: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
      } catch {
        return false;
      }
    });
}

afterAll(async () => {
  if (launcher?.pid && launcher.exitCode === null) {
    process.kill(-launcher.pid, 'SIGTERM');
    await eventually(() => launcher!.exitCode !== null || launcher!.signalCode !== null, 10_000, 'the launcher to stop').catch(() => undefined);
  }
  for (const pid of processesUnder(home)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  removeTmp();
});

/** The user's environment: no llmgw setting, nothing of pnpm's on PATH (the README's export puts ctl there). */
function userEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('LLMGW_') || k.startsWith('npm_') || k.startsWith('PNPM_') || k === 'NO_COLOR') continue;
    env[k] = v;
  }
  env.PATH = (process.env.PATH ?? '')
    .split(':')
    .filter((d) => !/node_modules\/\.bin\/?$/.test(d))
    .join(':');
  env.HOME = home;
  return env;
}

/** One command in a fresh bash, after the exports typed so far; stdout and stderr as one stream, as a terminal shows them. */
function sh(command: string, exports: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', `${exports.join('\n')}\n{\n${command}\n} 2>&1`], { cwd: root, env: userEnv(), timeout: 20_000 }, (err, stdout) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
      resolve({ code, output: stdout });
    });
  });
}

describe('the README', () => {
  it('has tested examples in the quick start and in ctl', () => {
    const count = (section: string) => all.filter((e) => e.section === section).length;
    expect(count('Quick start')).toBeGreaterThanOrEqual(5);
    expect(count('ctl')).toBeGreaterThanOrEqual(10);
  });

  it('prints what it shows: the quick start and ctl examples against a live instance', async () => {
    const [clientPort, adminPort] = [await freePort(), await freePort()];
    const client = `127.0.0.1:${clientPort}`;
    const admin = `127.0.0.1:${adminPort}`;
    launcher = spawn(process.execPath, [path.join(root, 'scripts/local.mjs')], {
      cwd: root,
      env: { ...userEnv(), LLMGW_CLIENT_ADDR: client, LLMGW_ADMIN_ADDR: admin },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let banner = '';
    launcher.stdout!.on('data', (d: Buffer) => (banner += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => (banner += d.toString()));
    await eventually(() => banner.includes('llmgw is running') || launcher!.exitCode !== null, 90_000, 'the banner');
    expect(banner).toContain('llmgw is running');
    // "Other ports": the banner prints the line to give ctl (and no LLMGW_HOME: it is ~/.llmgw).
    const exportLine = `export LLMGW_SERVER=https://${admin}`;
    expect(banner.split('\n').map((l) => l.trim())).toContain(exportLine);
    const exports = [exportLine];

    const host = os.hostname();
    const toLive = (s: string) =>
      s
        .replaceAll('127.0.0.1:8080', client)
        .replaceAll('127.0.0.1:8081', admin)
        .replace(/(?<![\w.-])my-machine(?![\w-])/g, host);
    const toReadme = (s: string) =>
      s
        .replaceAll(client, '127.0.0.1:8080')
        .replaceAll(admin, '127.0.0.1:8081')
        .replaceAll(home, '/home/me')
        .replace(new RegExp(`(?<![\\w.-])${host.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w-])`, 'g'), 'my-machine');

    let bound = new Map<string, string>();
    const ran: string[] = [];
    for (const ex of all) {
      const command = toLive(substitute(ex.command, bound));
      const r = await sh(command, exports);
      const output = toReadme(r.output);
      const got = { line: ex.line, command: ex.command, exit: r.code, output: output.trimEnd().split('\n') };
      const m = ex.output ? match(ex.output, got.output, bound) : undefined;
      if (m) bound = m;
      // On a mismatch the diff shows the README's lines against what was printed; an sh
      // line shows no output, so only its exit code is compared.
      expect(got).toEqual({ line: ex.line, command: ex.command, exit: ex.exit, output: ex.output && !m ? ex.output : got.output });
      if (/^export /.test(command)) exports.push(command);
      ran.push(`${ex.line}: ${ex.command.split('\n')[0]}`);
    }
    expect(ran.length).toBe(all.length);
  }, 120_000);
});
