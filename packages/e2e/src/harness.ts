import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent as HttpsDispatcher, fetch as undiciFetch } from 'undici';

/**
 * Helpers for journeys: the built binaries as real processes on 127.0.0.1:0, temp
 * directories, and fixture hardware from the agent package. Nothing is imported from
 * the packages under test; they are run as an operator would run them.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, '../../..');
export const bins = {
  server: path.join(root, 'packages/server/dist/main.js'),
  agent: path.join(root, 'packages/agent/dist/main.js'),
  testEngine: path.join(root, 'packages/test-engine/dist/main.js'),
  ctl: path.join(root, 'packages/ctl/dist/cli.js'),
};
export const fixtures = path.join(root, 'packages/agent/test/fixtures');

const children = new Set<ChildProcess>();
const agentStateDirs = new Set<string>();
const tmpDirs: string[] = [];

/** Whether a process exists (signal 0 checks without touching it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A port free right now, for a server that must come back on the same address. */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

export function tmpDir(prefix = 'llmgw-e2e-'): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(d);
  return d;
}

export interface Proc {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the first output line matching `re`. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function run(cmd: string, args: string[], env: Record<string, string> = {}, cwd = root): Proc {
  const child = spawn(process.execPath, [cmd, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  const waiters: { re: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of [...waiters]) {
      const m = out.match(w.re);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => children.delete(child));
  return {
    child,
    output: () => out,
    waitFor(re, timeoutMs = 20_000) {
      const m = out.match(re);
      if (m) return Promise.resolve(m);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${re} in:\n${out.slice(-3000)}`)), timeoutMs);
        waiters.push({ re, resolve: (mm) => (clearTimeout(t), resolve(mm)) });
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

/**
 * A catalog of one model, `echo`, served by the test engine through `engine: command`
 * (the agent hands the engine its key by environment; `{api_key}` is dropped from argv).
 */
export const ECHO_CATALOG = `models:
  - name: echo
    source: test
    scaling: { min: 1, max: 1 }
    profiles:
      - { name: cpu, engine: command, command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}"] }
`;

export const ADMIN_TOKEN = 'test-admin-token';
export const JOIN_TOKEN = 'test-join-token';

export interface ServerProc extends Proc {
  adminUrl: string;
  clientUrl: string;
  dataDir: string;
  /** The full join token the server wrote, as an operator copies it to an agent. */
  joinToken: string;
  /** `<data-dir>/tls/ca.pem` when the server generated its CA; what ctl gets as LLMGW_CA. */
  caFile?: string;
}

/**
 * What each running server's admin address is trusted with, as an operator would hand
 * it out: agents get the full join token, ctl gets the CA file, and the test's own
 * requests (`adminFetch`) trust that CA alone.
 */
const trustByUrl = new Map<string, { joinToken: string; caFile?: string; dispatcher?: HttpsDispatcher }>();

/** `fetch` for an admin address, verifying it against that server's CA (plain fetch for anything else). */
export function adminFetch(url: string, init: Parameters<typeof undiciFetch>[1] = {}): ReturnType<typeof undiciFetch> {
  const dispatcher = trustByUrl.get(new URL(url).origin)?.dispatcher;
  return undiciFetch(url, { ...init, ...(dispatcher ? { dispatcher } : {}) });
}

/** `env` adds to or overrides the server's environment (`LLMGW_JOIN_TOKEN: ''` lets it generate one). */
export async function startServer(
  opts: { dataDir?: string; catalog?: string; args?: string[]; adminAddr?: string; env?: Record<string, string> } = {},
): Promise<ServerProc> {
  const dataDir = opts.dataDir ?? tmpDir('llmgw-server-');
  const p = run(
    bins.server,
    [
      '--admin-addr',
      opts.adminAddr ?? '127.0.0.1:0',
      // The journeys' agents run on this machine and advertise 127.0.0.1.
      '--allow-loopback-nodes',
      '--client-addr',
      '127.0.0.1:0',
      '--data-dir',
      dataDir,
      '--not-ready-after',
      '3',
      '--reconcile-interval',
      '1',
      ...(opts.catalog ? ['--catalog', opts.catalog] : []),
      ...(opts.args ?? []),
    ],
    { LLMGW_ADMIN_TOKEN: ADMIN_TOKEN, LLMGW_JOIN_TOKEN: JOIN_TOKEN, ...opts.env },
  );
  const m = await p.waitFor(/"admin":"(https?:\/\/[^"]+)","client":"(https?:\/\/[^"]+)"/);
  const adminUrl = m[1]!;
  const joinToken = fs.readFileSync(path.join(dataDir, 'join-token'), 'utf8').trim();
  const caFile = path.join(dataDir, 'tls', 'ca.pem');
  const generated = adminUrl.startsWith('https:') && fs.existsSync(caFile);
  const dispatcher = generated ? new HttpsDispatcher({ connect: { ca: fs.readFileSync(caFile, 'utf8') } }) : undefined;
  trustByUrl.set(adminUrl, { joinToken, ...(generated ? { caFile } : {}), ...(dispatcher ? { dispatcher } : {}) });
  return { ...p, adminUrl, clientUrl: m[2]!, dataDir, joinToken, ...(generated ? { caFile } : {}) };
}

export interface AgentOpts {
  server: string;
  nodeId: string;
  nvidiaSmi?: string;
  proc?: string;
  sys?: string;
  labels?: string;
  pool?: string;
  stateDir?: string;
  token?: string;
  /** False: started without --allow-command-engine, as an operator who did not enable it. */
  allowCommandEngine?: boolean;
  args?: string[];
}

/** An agent process pointed at fixture hardware (`nvidia-smi/<name>`, `proc/<name>`, `sys/<name>`). */
export function startAgent(o: AgentOpts): Proc & { stateDir: string } {
  const stateDir = o.stateDir ?? tmpDir('llmgw-agent-');
  const p = run(
    bins.agent,
    [
      '--server',
      o.server,
      '--node-id',
      o.nodeId,
      '--nvidia-smi',
      o.nvidiaSmi ? path.join(fixtures, 'nvidia-smi', o.nvidiaSmi) : path.join(fixtures, 'nvidia-smi', 'absent'),
      '--proc-root',
      path.join(fixtures, 'proc', o.proc ?? 'cpu-8gb'),
      '--sys-root',
      path.join(fixtures, 'sys', o.sys ?? 'empty'),
      '--state-dir',
      stateDir,
      '--heartbeat-interval',
      '1',
      '--engine-host',
      '127.0.0.1',
      // Journeys run their engines through `engine: command`, and as the user running the
      // tests: CI runs as root, where the default would need an `llmgw` account. The
      // engine-user journey overrides this (the last --engine-user wins).
      ...(o.allowCommandEngine === false ? [] : ['--allow-command-engine']),
      '--engine-user',
      os.userInfo().username,
      ...(o.labels ? ['--labels', o.labels] : []),
      ...(o.pool ? ['--pool', o.pool] : []),
      ...(o.args ?? []),
    ],
    { LLMGW_JOIN_TOKEN: o.token ?? trustByUrl.get(o.server)?.joinToken ?? JOIN_TOKEN },
  );
  agentStateDirs.add(stateDir);
  return { ...p, stateDir };
}

export interface CtlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built ctl as a subprocess, as an operator would. */
export function ctl(server: string, args: string[], env: Record<string, string> = {}): Promise<CtlResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bins.ctl, ...args],
      {
        env: {
          ...process.env,
          NO_COLOR: '1',
          LLMGW_SERVER: server,
          LLMGW_ADMIN_TOKEN: ADMIN_TOKEN,
          LLMGW_HOME: tmpDir('llmgw-home-'),
          ...caEnv(server),
          ...env,
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function caEnv(server: string): Record<string, string> {
  const caFile = trustByUrl.get(server)?.caFile;
  return caFile ? { LLMGW_CA: caFile } : {};
}

export async function ctlJson<T>(server: string, args: string[]): Promise<T> {
  const r = await ctl(server, [...args, '-o', 'json']);
  if (r.code !== 0) throw new Error(`ctl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/** Polls `fn` until it returns a truthy value or the timeout passes. */
export async function eventually<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Table rows of ctl output keyed by their first column. */
export function rows(tableText: string): Map<string, Record<string, string>> {
  // The table ends at the first blank line; notes may follow it.
  const end = tableText.indexOf('\n\n');
  const lines = (end === -1 ? tableText : tableText.slice(0, end)).split('\n').filter((l) => l.trim());
  const header = lines[0] ?? '';
  const cols: { name: string; start: number }[] = [];
  const re = /(\S+(?: \S+)*)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(header))) cols.push({ name: m[1]!, start: m.index });
  const out = new Map<string, Record<string, string>>();
  for (const line of lines.slice(1)) {
    if (!line.trim() || line.length < (cols[1]?.start ?? 0)) continue;
    const rec: Record<string, string> = {};
    cols.forEach((c, i) => {
      rec[c.name] = line.slice(c.start, cols[i + 1]?.start ?? undefined).trim();
    });
    out.set(rec[cols[0]!.name]!, rec);
  }
  return out;
}

export async function cleanup(): Promise<void> {
  await Promise.all(
    [...children].map((c) => {
      c.kill('SIGKILL');
      return new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(undefined) : c.once('exit', r)));
    }),
  );
  // Engines outlive their agent by design; a test must not leave them behind.
  for (const dir of agentStateDirs) {
    try {
      const state = JSON.parse(fs.readFileSync(path.join(dir, 'shards.json'), 'utf8')) as { shards: { pgid: number }[] };
      for (const s of state.shards) {
        try {
          process.kill(-s.pgid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    } catch {
      /* no engines recorded */
    }
  }
  agentStateDirs.clear();
}

export function removeTmp(): void {
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}
