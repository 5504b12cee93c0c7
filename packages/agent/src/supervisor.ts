import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import got from 'got';
import type { Logger } from 'pino';
import type { ShardAssignment, ShardStatus } from '@llmgw/shared';
import { buildCommand, type EngineBins, type EngineCommand } from './engines.js';
import { groupExists, isSameProcess, readProcStat, signalGroup } from './proc.js';

/** Construction options; everything but the first five has a production default. */
export interface SupervisorOptions {
  /** Holds `shards.json` (what a restarted agent re-adopts) and `logs/<shard>.log`. */
  stateDir: string;
  /** Inclusive range engines may listen on. */
  portRange: [number, number];
  /** Address engines bind to; a wildcard is probed through loopback. */
  bindHost: string;
  bins: EngineBins;
  log: Logger;
  /** SIGTERM → SIGKILL grace for a process group. Default 10 s. */
  stopGraceMs?: number;
  /** When the assignment has no `startup_timeout_s`. Default 600 s. */
  defaultStartupTimeoutS?: number;
  /** Failures tolerated within `restartWindowMs` before a shard is reported failed. Default 5. */
  maxRestarts?: number;
  /** Default 10 min: a shard that crashes once a day is never given up on. */
  restartWindowMs?: number;
  /** First restart delay; doubles per recent failure, capped at 30 s. Default 1 s. */
  backoffBaseMs?: number;
  /** A log past this size is cut to its last half. Default 5 MiB. */
  logMaxBytes?: number;
  /** Readiness, health and liveness poll interval. Default 1 s. */
  healthIntervalMs?: number;
}

type LiveState = 'starting' | 'ready' | 'failed';

interface RunningProcess {
  pid: number;
  /** Equal to pid: `detached` makes the engine a session and group leader. */
  pgid: number;
  startTime: number;
  /** Absent for an engine adopted from an earlier agent: its exit is found by polling. */
  child?: ChildProcess;
}

interface Shard {
  a: ShardAssignment;
  fingerprint: string;
  state: LiveState;
  error?: string;
  port?: number;
  http: boolean;
  proc?: RunningProcess;
  restarts: number;
  /** Times of recent failures, for the restart budget and the backoff exponent. */
  failures: number[];
  /** Bumped on every transition so that late callbacks of an earlier run do nothing. */
  epoch: number;
  timer?: NodeJS.Timeout;
  deadlineAt: number;
  healthFailures: number;
  /** Why the agent itself killed the engine (startup deadline), reported with the exit. */
  killReason?: string;
  /** Launch postponed until a stopping engine with its id or GPUs is gone. */
  waiting: boolean;
}

/** One entry of `shards.json`. Field names are snake_case: operators read this file. */
interface ShardRecord {
  id: string;
  replica_id: string;
  fingerprint: string;
  pid: number;
  pgid: number;
  start_time: number;
  port?: number;
  restarts: number;
  http: boolean;
  /** Being stopped when the agent exited: the next agent finishes the job. */
  retiring?: boolean;
  assignment: ShardAssignment;
}

interface StateFile {
  version: 1;
  shards: ShardRecord[];
}

const MAX_BACKOFF_MS = 30_000;
/** Consecutive failed health checks before a ready engine is reported as not ready. */
const UNHEALTHY_AFTER = 3;
/** Probe timeout: 5 s (agent.md §3), shorter when polling faster so that probes do not pile up. */
const probeTimeoutMs = (intervalMs: number) => Math.min(5_000, Math.max(250, intervalMs * 5));
/** After SIGKILL a group normally vanishes at once; do not wait forever on an unreaped zombie. */
const KILL_WAIT_MS = 5_000;
const LOG_TAIL_LINES = 10;
const LOG_LINE_MAX = 500;
const ERROR_MAX = 16_000;
const LAUNCH_MARK = '=== llmgw-agent ';
/** Engines must not see the agent's own credential. */
const PRIVATE_ENV = ['LLMGW_JOIN_TOKEN'];

/** No keep-alive: an engine's port may be reused by another engine after a restart. */
const probeAgent = new http.Agent({ keepAlive: false });

/**
 * Runs the shards assigned to this node as supervised engine processes (DESIGN §5).
 *
 * - Each engine is its own process group (`detached`), logs to a bounded file through
 *   a file descriptor, and is unref'd: engines outlive the agent, and a new agent
 *   re-adopts them from `shards.json`, matched by pid AND /proc start time.
 * - Restart policy: a crash or a missed startup deadline is a failure; failures are
 *   retried after `backoffBaseMs × 2^(recent failures − 1)` (≤ 30 s); more than
 *   `maxRestarts` failures within `restartWindowMs` → `failed`, kept until the server
 *   changes or removes the assignment.
 * - A ready engine failing 3 health checks in a row goes back to `starting` (so the
 *   gateway stops routing to it) and gets a fresh startup deadline; recovering makes it
 *   ready again, missing the deadline restarts it like a failed start. This covers vLLM's
 *   dead-engine state, where the process lives on but /health answers 503.
 * - Ports: a restart keeps the shard's port when it is still bindable, so its endpoint
 *   stays put; a new shard takes the next free port after the last one handed out
 *   (round-robin), so a just-stopped engine's port is not reused at once.
 */
export class Supervisor {
  /** Emits 'change' whenever `statuses()` would return something different. */
  readonly events = new EventEmitter();

  private readonly shards = new Map<string, Shard>();
  private readonly retiring = new Set<Shard>();
  private readonly stops = new Set<Promise<void>>();
  private readonly opts: Required<SupervisorOptions>;
  private readonly log: Logger;
  private closed = false;
  private portCursor: number;
  private lastStatuses = '[]';
  private lastSaved = '';

  constructor(options: SupervisorOptions) {
    this.opts = {
      stopGraceMs: 10_000,
      defaultStartupTimeoutS: 600,
      maxRestarts: 5,
      restartWindowMs: 10 * 60_000,
      backoffBaseMs: 1_000,
      logMaxBytes: 5 * 1024 * 1024,
      healthIntervalMs: 1_000,
      ...options,
    };
    this.log = options.log;
    this.portCursor = options.portRange[0];
  }

  /**
   * Re-adopts engines recorded by an earlier agent. Call once at start, before the first
   * `converge`. A record whose pid is dead, or alive with another start time (the pid was
   * reused), is forgotten; survivors are probed once so that a ready engine is reported
   * ready straight away instead of flapping through `starting`.
   */
  async adopt(): Promise<void> {
    const adopted: Shard[] = [];
    for (const rec of this.readState()) {
      if (!isSameProcess(rec.pid, rec.start_time)) {
        this.log.info({ shard: rec.id, pid: rec.pid }, 'recorded engine is gone; forgetting it');
        continue;
      }
      const s = shardFromRecord(rec);
      if (rec.retiring || this.shards.has(rec.id)) {
        this.log.info({ shard: rec.id, pid: rec.pid }, 'finishing the stop of a recorded engine');
        this.retire(s);
        continue;
      }
      this.log.info({ shard: rec.id, pid: rec.pid, port: rec.port }, 'adopted running engine');
      // When it was launched is unknown; a still-loading engine gets a full deadline from now.
      s.deadlineAt = Date.now() + this.startupTimeoutMs(s);
      this.shards.set(rec.id, s);
      adopted.push(s);
    }
    this.persist();
    await Promise.all(adopted.map((s) => this.firstCheck(s)));
    this.notify();
  }

  /**
   * Makes the running set equal to `assignments`: starts what is missing, stops what is
   * no longer assigned (adopted engines included), restarts a shard whose assignment
   * changed (same id, other fingerprint), and leaves matching shards alone — a `failed`
   * one included, until the server changes or drops it.
   */
  converge(assignments: ShardAssignment[]): void {
    if (this.closed) return;
    const wanted = new Map(assignments.map((a) => [a.id, a]));
    for (const s of [...this.shards.values()]) {
      const a = wanted.get(s.a.id);
      if (!a || fingerprint(a) !== s.fingerprint) this.retire(s);
      else s.a = a; // fields outside the fingerprint (startup timeout) may change freely
    }
    for (const a of wanted.values()) {
      if (this.shards.has(a.id)) continue;
      const s = newShard(a);
      this.shards.set(a.id, s);
      void this.launch(s);
    }
    this.persist();
    this.notify();
  }

  /** The status of every shard the server assigned; engines being stopped are not listed. */
  statuses(): ShardStatus[] {
    return [...this.shards.values()].map((s) => ({
      id: s.a.id,
      replica_id: s.a.replica_id,
      state: s.state,
      ...(s.proc ? { pid: s.proc.pid } : {}),
      ...(s.port !== undefined ? { port: s.port } : {}),
      restarts: s.restarts,
      ...(s.error ? { error: s.error } : {}),
    }));
  }

  /** The end of a shard's log (at most `maxBytes`, whole lines), for `ctl logs`. */
  logTail(shardId: string, maxBytes = 16 * 1024): string {
    return readTail(this.logPath(shardId), maxBytes);
  }

  /**
   * Stops supervising. By default engines keep running (an agent upgrade must not take
   * models down) and the state is saved for the next agent; `stopEngines` stops them all.
   * Stops already under way are finished either way: they were decided on.
   */
  async shutdown(opts: { stopEngines: boolean }): Promise<void> {
    if (opts.stopEngines) for (const s of [...this.shards.values()]) this.retire(s);
    this.closed = true;
    for (const s of this.shards.values()) this.clearTimer(s);
    await Promise.all([...this.stops]);
    this.persist();
  }

  // ---- launching -------------------------------------------------------------------

  private async launch(s: Shard): Promise<void> {
    const epoch = ++s.epoch;
    if (this.closed) return;
    const blocker = this.blocker(s);
    if (blocker) {
      s.waiting = true;
      this.setState(s, 'starting', `waiting for the engine of shard ${blocker.a.id} to stop`);
      return;
    }
    s.waiting = false;
    const port = await this.reservePort(s);
    if (epoch !== s.epoch || this.closed) return;
    if (port === undefined) {
      this.failure(s, `no free port in ${this.opts.portRange[0]}-${this.opts.portRange[1]} on ${this.opts.bindHost}`);
      return;
    }
    let cmd: EngineCommand;
    try {
      cmd = buildCommand(s.a, { host: this.opts.bindHost, port, bins: this.opts.bins });
    } catch (err) {
      // A command that cannot be built will not build on retry either.
      s.port = undefined;
      this.setState(s, 'failed', (err as Error).message);
      return;
    }
    s.http = cmd.http;
    try {
      this.spawnEngine(s, epoch, cmd);
    } catch (err) {
      this.failure(s, `cannot start ${cmd.argv[0]}: ${(err as Error).message}`);
      return;
    }
    this.scheduleTick(s, epoch);
    this.persist();
    this.notify();
  }

  private spawnEngine(s: Shard, epoch: number, cmd: EngineCommand): void {
    const logPath = this.logPath(s.a.id);
    fs.mkdirSync(path.dirname(logPath), { recursive: true });
    const shown = cmd.argv.map((arg) => redact(arg, s.a.api_key)).join(' ');
    fs.appendFileSync(logPath, `\n${LAUNCH_MARK}${new Date().toISOString()} launch #${s.restarts} of shard ${s.a.id}: ${shown}\n`);
    // A file descriptor, not a pipe: a pipe would break (SIGPIPE) when the agent exits.
    const fd = fs.openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(cmd.argv[0], cmd.argv.slice(1), {
        detached: true,
        stdio: ['ignore', fd, fd],
        env: engineEnvironment(cmd.env),
      });
    } finally {
      fs.closeSync(fd);
    }
    child.once('error', (err) => {
      if (child.pid === undefined) this.onSpawnError(s, epoch, cmd.argv[0], err);
    });
    if (child.pid === undefined) return; // 'error' follows
    child.once('exit', (code, signal) => this.onExit(s, epoch, describeExit(code, signal)));
    child.unref();
    const startTime = readProcStat(child.pid)?.startTime ?? 0;
    s.proc = { pid: child.pid, pgid: child.pid, startTime, child };
    s.healthFailures = 0;
    s.deadlineAt = Date.now() + this.startupTimeoutMs(s);
    this.setState(s, 'starting', undefined);
    this.log.info({ shard: s.a.id, pid: child.pid, port: s.port, restarts: s.restarts }, 'engine started');
  }

  private onSpawnError(s: Shard, epoch: number, bin: string, err: Error): void {
    if (epoch !== s.epoch || this.closed) return;
    s.epoch++;
    this.clearTimer(s);
    this.failure(s, `cannot start ${bin}: ${err.message}`);
  }

  /** A stopping engine that holds this shard's id or any of its GPUs; starting beside it would collide. */
  private blocker(s: Shard): Shard | undefined {
    for (const r of this.retiring) {
      if (r.a.id === s.a.id || r.a.gpus.some((g) => s.a.gpus.includes(g))) return r;
    }
    return undefined;
  }

  /** Launches shards that waited for a stop to finish. */
  private kick(): void {
    for (const s of this.shards.values()) if (s.waiting && !this.blocker(s)) void this.launch(s);
  }

  private startupTimeoutMs(s: Shard): number {
    return (s.a.startup_timeout_s ?? this.opts.defaultStartupTimeoutS) * 1000;
  }

  // ---- ports -----------------------------------------------------------------------

  /**
   * Reserves (sets `s.port` before the async bind check, so that concurrent launches
   * skip it) the shard's previous port if still free, else the next free one.
   */
  private async reservePort(s: Shard): Promise<number | undefined> {
    const [lo, hi] = this.opts.portRange;
    const previous = s.port !== undefined && s.port >= lo && s.port <= hi ? s.port : undefined;
    s.port = undefined;
    if (previous !== undefined && (await this.tryPort(s, previous))) return previous;
    const size = hi - lo + 1;
    for (let i = 0; i < size; i++) {
      const port = lo + ((this.portCursor - lo + i) % size);
      if (!(await this.tryPort(s, port))) continue;
      this.portCursor = port === hi ? lo : port + 1;
      return port;
    }
    return undefined;
  }

  private async tryPort(s: Shard, port: number): Promise<boolean> {
    if (this.portTaken(port)) return false;
    s.port = port;
    if (await canBind(port, this.opts.bindHost)) return true;
    s.port = undefined;
    return false;
  }

  private portTaken(port: number): boolean {
    for (const s of this.shards.values()) if (s.port === port) return true;
    for (const s of this.retiring) if (s.port === port) return true;
    return false;
  }

  // ---- health ----------------------------------------------------------------------

  private scheduleTick(s: Shard, epoch: number): void {
    this.clearTimer(s);
    s.timer = setTimeout(() => void this.tick(s, epoch), this.opts.healthIntervalMs);
    s.timer.unref();
  }

  /** One poll: liveness of an adopted engine, readiness or health, the startup deadline, the log size. */
  private async tick(s: Shard, epoch: number): Promise<void> {
    if (epoch !== s.epoch || this.closed || !s.proc) return;
    await this.boundLog(s.a.id);
    if (epoch !== s.epoch || this.closed || !s.proc) return;
    const proc = s.proc;
    if (!proc.child && !isSameProcess(proc.pid, proc.startTime)) {
      this.onExit(s, epoch, 'exited (exit status unknown: the engine was adopted from an earlier agent)');
      return;
    }
    const problem = s.http ? await this.check(s) : null;
    if (epoch !== s.epoch || this.closed) return;
    this.applyCheck(s, problem);
    if (s.state === 'starting' && Date.now() > s.deadlineAt) this.missedDeadline(s, problem);
    this.scheduleTick(s, epoch);
  }

  /** Adoption-time probe; then the regular polling takes over. */
  private async firstCheck(s: Shard): Promise<void> {
    const epoch = s.epoch;
    const problem = s.http ? await this.check(s) : null;
    if (epoch !== s.epoch || this.closed) return;
    if (problem === null) this.setState(s, 'ready', undefined);
    this.scheduleTick(s, epoch);
  }

  /** Null when healthy; else why not. A starting engine must also list its served name. */
  private check(s: Shard): Promise<string | null> {
    const base = `http://${probeHost(this.opts.bindHost)}:${s.port}`;
    return probeEngine(base, s.a, s.state !== 'ready', probeTimeoutMs(this.opts.healthIntervalMs));
  }

  private applyCheck(s: Shard, problem: string | null): void {
    if (problem === null) {
      s.healthFailures = 0;
      if (s.state !== 'ready') {
        this.log.info({ shard: s.a.id, port: s.port }, 'engine ready');
        this.setState(s, 'ready', undefined);
      }
      return;
    }
    if (s.state !== 'ready') return; // loading engines refuse connections or answer 503: normal
    s.healthFailures++;
    if (s.healthFailures < UNHEALTHY_AFTER) return;
    this.log.warn({ shard: s.a.id, problem }, 'ready engine stopped answering health checks');
    s.deadlineAt = Date.now() + this.startupTimeoutMs(s);
    this.setState(s, 'starting', `not answering health checks (${problem})`);
  }

  /** A start that takes too long is a failed start: kill the group, the exit handler restarts it. */
  private missedDeadline(s: Shard, problem: string | null): void {
    const secs = this.startupTimeoutMs(s) / 1000;
    s.killReason = `not ready within ${secs}s${problem ? ` (last check: ${problem})` : ''}`;
    s.deadlineAt = Infinity;
    this.log.warn({ shard: s.a.id, pid: s.proc?.pid }, s.killReason);
    if (s.proc) killGroupQuietly(s.proc.pgid, 'SIGKILL', this.log);
  }

  // ---- exits and restarts ----------------------------------------------------------

  private onExit(s: Shard, epoch: number, how: string): void {
    if (epoch !== s.epoch || this.closed) return;
    s.epoch++;
    this.clearTimer(s);
    // Workers of a dead leader (vLLM's EngineCore, per-GPU processes) would keep GPU memory.
    if (s.proc) killGroupQuietly(s.proc.pgid, 'SIGKILL', this.log);
    const what = s.killReason ? `${s.killReason}; ${how}` : how;
    this.log.warn({ shard: s.a.id, pid: s.proc?.pid }, `engine ${what}`);
    s.proc = undefined;
    s.killReason = undefined;
    this.failure(s, what);
  }

  private failure(s: Shard, what: string): void {
    const now = Date.now();
    s.failures = s.failures.filter((t) => now - t < this.opts.restartWindowMs);
    s.failures.push(now);
    if (s.failures.length > this.opts.maxRestarts) {
      const tail = lastLogLines(this.logPath(s.a.id));
      this.setState(s, 'failed', `${what} after ${s.restarts} restarts; last log lines:\n${tail || '(none)'}`);
      this.persist();
      return;
    }
    const delay = Math.min(this.opts.backoffBaseMs * 2 ** (s.failures.length - 1), MAX_BACKOFF_MS);
    this.setState(s, 'starting', `${what}; restarting in ${delay / 1000}s`);
    const epoch = s.epoch;
    this.clearTimer(s);
    s.timer = setTimeout(() => {
      if (epoch !== s.epoch || this.closed) return;
      s.restarts++;
      void this.launch(s);
    }, delay);
    s.timer.unref();
    this.persist();
  }

  // ---- stopping --------------------------------------------------------------------

  /** Takes a shard out of the assigned set and stops its engine, if any. */
  private retire(s: Shard): void {
    if (this.shards.get(s.a.id) === s) this.shards.delete(s.a.id);
    s.epoch++;
    s.waiting = false;
    this.clearTimer(s);
    if (!s.proc) {
      this.kick();
      return;
    }
    this.retiring.add(s);
    this.log.info({ shard: s.a.id, pid: s.proc.pid }, 'stopping engine');
    const stop = stopGroup(s.proc, this.opts.stopGraceMs, this.log).finally(() => {
      this.retiring.delete(s);
      this.stops.delete(stop);
      s.proc = undefined;
      this.persist();
      if (!this.closed) this.kick();
    });
    this.stops.add(stop);
  }

  // ---- logs ------------------------------------------------------------------------

  private logPath(id: string): string {
    return path.join(this.opts.stateDir, 'logs', `${safeName(id)}.log`);
  }

  /**
   * Keeps the last half of a log that outgrew logMaxBytes, in place: the engine holds
   * an O_APPEND descriptor to this inode, so its next write lands at the new end.
   * Output written during the rewrite may be lost; a bounded disk is worth that.
   */
  private async boundLog(id: string): Promise<void> {
    const file = this.logPath(id);
    try {
      const { size } = await fsp.stat(file);
      if (size <= this.opts.logMaxBytes) return;
      const keep = Math.floor(this.opts.logMaxBytes / 2);
      const fh = await fsp.open(file, 'r+');
      try {
        const buf = Buffer.alloc(keep);
        const { bytesRead } = await fh.read(buf, 0, keep, size - keep);
        const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
        const body = buf.subarray(nl === -1 ? 0 : nl + 1, bytesRead);
        const note = Buffer.from(`--- llmgw-agent: earlier output dropped to keep this log under ${this.opts.logMaxBytes} bytes\n`);
        const out = Buffer.concat([note, body]);
        await fh.write(out, 0, out.length, 0);
        await fh.truncate(out.length);
      } finally {
        await fh.close();
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err, file }, 'cannot bound engine log');
    }
  }

  // ---- state -----------------------------------------------------------------------

  private setState(s: Shard, state: LiveState, error: string | undefined): void {
    s.state = state;
    s.error = error === undefined ? undefined : error.slice(0, ERROR_MAX);
    this.notify();
  }

  private clearTimer(s: Shard): void {
    if (s.timer) clearTimeout(s.timer);
    s.timer = undefined;
  }

  private notify(): void {
    const now = JSON.stringify(this.statuses());
    if (now === this.lastStatuses) return;
    this.lastStatuses = now;
    this.persist();
    this.events.emit('change');
  }

  private statePath(): string {
    return path.join(this.opts.stateDir, 'shards.json');
  }

  /** Writes shards.json when it would change; tmp + rename so a crash never leaves half a file. */
  private persist(): void {
    const records = [...this.shards.values(), ...this.retiring].flatMap((s) => (s.proc ? [toRecord(s, this.retiring.has(s))] : []));
    const text = JSON.stringify({ version: 1, shards: records } satisfies StateFile, null, 2) + '\n';
    if (text === this.lastSaved) return;
    try {
      fs.mkdirSync(this.opts.stateDir, { recursive: true });
      const tmp = `${this.statePath()}.tmp`;
      fs.writeFileSync(tmp, text, { mode: 0o600 }); // holds API keys
      fs.renameSync(tmp, this.statePath());
      this.lastSaved = text;
    } catch (err) {
      this.log.error({ err }, 'cannot save engine state; a restarted agent would not re-adopt engines');
    }
  }

  private readState(): ShardRecord[] {
    let text: string;
    try {
      text = fs.readFileSync(this.statePath(), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err }, 'cannot read engine state');
      return [];
    }
    try {
      const parsed = JSON.parse(text) as Partial<StateFile>;
      return (Array.isArray(parsed.shards) ? parsed.shards : []).filter(isRecord);
    } catch (err) {
      this.log.warn({ err }, 'engine state file is not JSON; adopting nothing');
      return [];
    }
  }
}

// ---- helpers ---------------------------------------------------------------------------

function newShard(a: ShardAssignment): Shard {
  return {
    a,
    fingerprint: fingerprint(a),
    state: 'starting',
    http: a.rank === 0,
    restarts: 0,
    failures: [],
    epoch: 0,
    deadlineAt: Infinity,
    healthFailures: 0,
    waiting: false,
  };
}

function shardFromRecord(rec: ShardRecord): Shard {
  return {
    ...newShard(rec.assignment),
    fingerprint: rec.fingerprint,
    port: rec.port,
    http: typeof rec.http === 'boolean' ? rec.http : rec.assignment.rank === 0,
    restarts: Number.isInteger(rec.restarts) ? rec.restarts : 0,
    proc: { pid: rec.pid, pgid: rec.pgid, startTime: rec.start_time },
  };
}

function toRecord(s: Shard, retiring: boolean): ShardRecord {
  const p = s.proc!;
  return {
    id: s.a.id,
    replica_id: s.a.replica_id,
    fingerprint: s.fingerprint,
    pid: p.pid,
    pgid: p.pgid,
    start_time: p.startTime,
    ...(s.port !== undefined ? { port: s.port } : {}),
    restarts: s.restarts,
    http: s.http,
    ...(retiring ? { retiring: true } : {}),
    assignment: s.a,
  };
}

function isRecord(v: unknown): v is ShardRecord {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  const a = r.assignment as Record<string, unknown> | undefined;
  return (
    typeof r.id === 'string' &&
    Number.isInteger(r.pid) && (r.pid as number) > 0 &&
    Number.isInteger(r.pgid) && (r.pgid as number) > 0 &&
    typeof r.start_time === 'number' &&
    typeof r.fingerprint === 'string' &&
    typeof a === 'object' && a !== null && a.id === r.id && Array.isArray(a.gpus)
  );
}

/**
 * What decides whether a running engine still matches its assignment. Deliberately
 * left out: `startup_timeout_s` (no reason to restart a running engine) and
 * `gpu_indices` (indices shift when another GPU is lost; the UUIDs are what the engine sees).
 */
const FINGERPRINT_FIELDS = [
  'id', 'replica_id', 'model', 'profile', 'engine', 'source', 'rank', 'shards', 'gpus',
  'args', 'env', 'command', 'master_addr', 'master_port', 'api_key',
] as const;

/** A stable hash of the assignment fields that shape the engine process. */
export function fingerprint(a: ShardAssignment): string {
  const picked: Record<string, unknown> = {};
  for (const f of FINGERPRINT_FIELDS) if (a[f] !== undefined) picked[f] = a[f];
  return 'v1:' + createHash('sha256').update(canonicalJson(picked)).digest('hex').slice(0, 32);
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

function engineEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const k of PRIVATE_ENV) delete env[k];
  return env;
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return `exited with code ${code ?? 'none'} (signal ${signal ?? 'none'})`;
}

function redact(arg: string, secret: string | undefined): string {
  return secret ? arg.split(secret).join('***') : arg;
}

/** Shard ids are server-chosen strings; never let one walk out of the logs directory. */
function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
}

function probeHost(bindHost: string): string {
  if (bindHost === '' || bindHost === '0.0.0.0') return '127.0.0.1';
  if (bindHost === '::') return '[::1]';
  return bindHost.includes(':') ? `[${bindHost}]` : bindHost;
}

function canBind(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * Readiness per agent.md §3: `/health` answers 200 and, unless only liveness is wanted,
 * `/v1/models` lists the served name. Connection refused and 503 are normal while loading.
 */
export async function probeEngine(base: string, a: ShardAssignment, full: boolean, timeoutMs = 5_000): Promise<string | null> {
  const options = {
    throwHttpErrors: false,
    retry: { limit: 0 },
    timeout: { request: timeoutMs },
    agent: { http: probeAgent },
    headers: a.api_key ? { authorization: `Bearer ${a.api_key}` } : {},
  };
  try {
    const health = await got(`${base}/health`, options);
    if (health.statusCode !== 200) return `/health answered ${health.statusCode}`;
    if (!full) return null;
    const models = await got(`${base}/v1/models`, options);
    if (models.statusCode !== 200) return `/v1/models answered ${models.statusCode}`;
    const ids = modelIds(models.body);
    return ids.includes(a.model) ? null : `/v1/models does not list "${a.model}" (it lists ${JSON.stringify(ids)})`;
  } catch (err) {
    return (err as Error).message;
  }
}

function modelIds(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { data?: unknown };
    if (!Array.isArray(parsed.data)) return [];
    return parsed.data.flatMap((m: unknown) => {
      const id = (m as { id?: unknown } | null)?.id;
      return typeof id === 'string' ? [id] : [];
    });
  } catch {
    return [];
  }
}

/** The last `maxBytes` of a file, from a line start; '' when it cannot be read. */
function readTail(file: string, maxBytes: number): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const len = Math.min(size, maxBytes);
      const buf = Buffer.alloc(len);
      fs.readSync(fd, buf, 0, len, size - len);
      const text = buf.toString('utf8');
      return len < size ? text.slice(text.indexOf('\n') + 1) : text;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** The last lines the current run of the engine wrote (after the agent's launch mark). */
function lastLogLines(file: string): string {
  let text = readTail(file, 64 * 1024);
  if (!text) return '';
  const mark = text.lastIndexOf(LAUNCH_MARK);
  if (mark !== -1) text = text.slice(text.indexOf('\n', mark) + 1);
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-LOG_TAIL_LINES)
    .map((l) => (l.length > LOG_LINE_MAX ? `${l.slice(0, LOG_LINE_MAX)}…` : l))
    .join('\n');
}

function killGroupQuietly(pgid: number, signal: NodeJS.Signals, log: Logger): void {
  try {
    signalGroup(pgid, signal);
  } catch (err) {
    log.warn({ err, pgid }, `cannot send ${signal} to engine process group`);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitGroupGone(pgid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (groupExists(pgid)) {
    if (Date.now() >= until) return false;
    await sleep(50);
  }
  return true;
}

/**
 * SIGTERM to the group, SIGKILL after the grace period; resolves when the group is gone.
 * If the leader's pid now belongs to another process (same pid, other start time) the
 * group id may be a stranger's, so nothing is signalled. A gone leader with a surviving
 * group is safe to signal: Linux does not reuse a pid while it names a live group.
 */
async function stopGroup(p: RunningProcess, graceMs: number, log: Logger): Promise<void> {
  const stat = readProcStat(p.pid);
  if (stat && stat.startTime !== p.startTime) return;
  killGroupQuietly(p.pgid, 'SIGTERM', log);
  if (await waitGroupGone(p.pgid, graceMs)) return;
  log.warn({ pgid: p.pgid }, 'engine ignored SIGTERM; sending SIGKILL');
  killGroupQuietly(p.pgid, 'SIGKILL', log);
  if (!(await waitGroupGone(p.pgid, KILL_WAIT_MS))) log.error({ pgid: p.pgid }, 'engine process group survived SIGKILL');
}
