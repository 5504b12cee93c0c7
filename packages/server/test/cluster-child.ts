import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * A LeaderLease in a process of its own, to SIGSTOP and SIGKILL for real. The cluster
 * sources are transpiled (TypeScript's own transpiler, no type check) into a folder under
 * this package's node_modules, where `pg` and `pino` resolve as they do for the server.
 * The child talks over IPC: it sends `{change}` on every leadership change, `{resumed}`
 * when its 10 ms sampler finds a gap (it was stopped), and `{status}` when asked.
 */
const SRC = fileURLToPath(new URL('../src/cluster/', import.meta.url));
const CACHE = fileURLToPath(new URL('../node_modules/.cache/', import.meta.url));

const CHILD = `
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { pino } from 'pino';
import { LeaderLease } from './lease.js';
const [url, id, ttl] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 1000 });
pool.on('error', () => {});
const lease = new LeaderLease({ pool, log: pino(pino.destination(2)), instanceId: id, ttlMs: Number(ttl) });
let changedSincePause = false;
// The fence as last held: set on the change itself too, so a stop that lands before the
// sampler's next tick still reports the term it held (the race seen on a loaded machine).
let lastFence = null;
lease.onChange((leader) => {
  changedSincePause = true;
  lastFence = lease.fence() ?? lastFence;
  process.send({ change: leader, fence: lease.fence() ?? null, info: lease.info() });
});
let last = performance.now();
setInterval(() => {
  const t = performance.now();
  if (t - last > Number(ttl) / 2) {
    const wasChanged = changedSincePause;
    process.send({ resumed: true, gapMs: Math.round(t - last), leader: lease.isLeader(), fence: lastFence, lossAlreadyReported: wasChanged });
  }
  changedSincePause = false;
  last = t;
  lastFence = lease.fence() ?? lastFence;
}, 10);
process.on('message', (m) => {
  if (m === 'status') process.send({ status: lease.isLeader(), info: lease.info() });
});
await lease.start();
process.send({ started: true });
`;

let built: string | undefined;

/** Transpiles src/cluster once per test file and writes the child's entry beside it. */
function build(): string {
  if (built) return built;
  const dir = path.join(CACHE, `llmgw-cluster-child-${process.pid}-${randomBytes(3).toString('hex')}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  for (const f of fs.readdirSync(SRC)) {
    if (!f.endsWith('.ts') || f.endsWith('.test.ts')) continue;
    const out = ts.transpileModule(fs.readFileSync(path.join(SRC, f), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    fs.writeFileSync(path.join(dir, f.replace(/\.ts$/, '.js')), out.outputText);
  }
  fs.writeFileSync(path.join(dir, 'child.mjs'), CHILD);
  built = dir;
  return dir;
}

/** Removes what build() wrote. */
export function removeChildBuild(): void {
  if (built) fs.rmSync(built, { recursive: true, force: true });
  built = undefined;
}

export interface ChildMessage {
  change?: boolean;
  fence?: { holder: string; epoch: number } | null;
  info?: { holder?: string; epoch: number; sinceMs?: number };
  resumed?: boolean;
  gapMs?: number;
  leader?: boolean;
  lossAlreadyReported?: boolean;
  started?: boolean;
  status?: boolean;
}

/** A lease child with its messages and stderr (its log) collected. */
export class LeaseChild {
  readonly proc: ChildProcess;
  readonly messages: ChildMessage[] = [];
  stderr = '';
  private waiters: Array<() => void> = [];

  constructor(
    url: string,
    readonly id: string,
    ttlMs: number,
  ) {
    this.proc = fork(path.join(build(), 'child.mjs'), [url, id, String(ttlMs)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], execArgv: [] });
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.proc.on('message', (m) => {
      this.messages.push(m as ChildMessage);
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** The first message (from now on, unless `fromStart`) that `pred` accepts. */
  async next(pred: (m: ChildMessage) => boolean, timeoutMs = 10_000, from = this.messages.length): Promise<ChildMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.messages.slice(from).find(pred);
      if (m) return m;
      if (Date.now() > deadline)
        throw new Error(`child ${this.id}: no such message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}; log: ${this.stderr}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  async status(): Promise<ChildMessage> {
    const from = this.messages.length;
    this.proc.send('status');
    return this.next((m) => m.status !== undefined, 5000, from);
  }

  /** SIGKILLs it (if alive) and waits for the exit. */
  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGKILL');
    await exited;
  }
}
