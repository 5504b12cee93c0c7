import { EventEmitter } from 'node:events';
import path from 'node:path';
import type { Logger } from 'pino';
import { redactSecrets, type ShardAssignment, type ShardStatus } from '@llmgw/shared';
import { buildCommand, type EngineCommand } from '../engines.js';
import { isSameProcess } from '../proc.js';
import { isUnrunnable } from '../files/store.js';
import { blockerOf, planConverge } from './converge.js';
import { probeEngine, probeHost, probeTimeoutMs } from './health.js';
import { boundLog, lastLogLines, logPath, readTail, writeLaunchMark } from './logs.js';
import { restartPolicy, withDefaults, type ResolvedOptions, type SupervisorOptions } from './options.js';
import { PortPool } from './ports.js';
import { downloadOf, newShard, shardFromRecord, withModelFile, type Shard } from './shard.js';
import { privateStateDir } from './private-files.js';
import { spawnEngine } from './spawn.js';
import { adoptionOf, StateFileStore, toRecord, type ShardRecord } from './state-file.js';
import { exitReason, step, type Decision, type RestartPolicy, type ShardEvent } from './state-machine.js';
import { killGroupQuietly, stopGroup } from './stop.js';

/** How much of a starting vLLM/SGLang log is searched for download bars: seconds of redraws of several bars. */
const HUB_TAIL_BYTES = 64 * 1024;

/**
 * Runs the shards assigned to this node as supervised engine processes ("supervise" in
 * the agent's README.md).
 * The rules live in the steps it composes: `state-machine` (restarts, backoff, health,
 * deadlines), `converge` (what to start and stop), `ports`, `spawn`/`stop` (process
 * groups), `health` (readiness probes), `logs` (bounded files) and `state-file`
 * (re-adoption by pid and start time). This class holds the shards, the timers and the
 * epochs that make late callbacks harmless.
 */
export class Supervisor {
  /** Emits 'change' whenever `statuses()` would return something different. */
  readonly events = new EventEmitter();

  private readonly shards = new Map<string, Shard>();
  private readonly retiring = new Set<Shard>();
  private readonly stops = new Set<Promise<void>>();
  private readonly opts: ResolvedOptions;
  private readonly log: Logger;
  private readonly policy: RestartPolicy;
  private readonly ports: PortPool;
  private readonly stateFile: StateFileStore;
  private closed = false;
  private lastStatuses = '[]';

  constructor(options: SupervisorOptions) {
    this.opts = withDefaults(options);
    this.log = options.log;
    this.policy = restartPolicy(this.opts);
    this.ports = new PortPool(options.portRange, options.bindHost);
    this.stateFile = new StateFileStore(options.stateDir, options.log);
    privateStateDir(options.stateDir, options.engineUser !== undefined);
  }

  /**
   * Re-adopts engines recorded by an earlier agent. Call once at start, before the first
   * `converge`. A record whose pid is dead, or alive with another start time (the pid was
   * reused), is forgotten; survivors are probed once so that a ready engine is reported
   * ready straight away instead of flapping through `starting`.
   */
  async adopt(): Promise<void> {
    const adopted: Shard[] = [];
    for (const rec of this.stateFile.load()) {
      const fate = adoptionOf(rec, isSameProcess(rec.pid, rec.start_time), this.shards.has(rec.id));
      if (fate === 'forget') {
        this.log.info({ shard: rec.id, pid: rec.pid }, 'recorded engine is gone; forgetting it');
        continue;
      }
      const s = shardFromRecord(rec);
      if (fate === 'finish-stop') {
        this.log.info({ shard: rec.id, pid: rec.pid }, 'finishing the stop of a recorded engine');
        this.retire(s);
        continue;
      }
      this.log.info({ shard: rec.id, pid: rec.pid, port: rec.port }, 'adopted running engine');
      this.apply(s, { type: 'adopted', now: Date.now(), startupTimeoutMs: this.startupTimeoutMs(s) });
      this.shards.set(rec.id, s);
      adopted.push(s);
    }
    this.persist();
    await Promise.all(adopted.map((s) => this.firstCheck(s)));
    this.notify();
  }

  /**
   * Makes the running set equal to `assignments` (see `planConverge`): starts what is
   * missing, stops what is no longer assigned (adopted engines included), restarts a
   * shard whose assignment changed, and leaves matching shards alone.
   */
  converge(assignments: ShardAssignment[]): void {
    if (this.closed) return;
    const plan = planConverge(this.shards.values(), assignments);
    // Fields outside the fingerprint (startup timeout) may change freely; updated before
    // the retirements below can kick a waiting shard into launching.
    for (const { shard, assignment } of plan.keep) shard.a = assignment;
    for (const s of plan.retire) this.retire(s);
    for (const a of plan.start) {
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
      state: s.life.state,
      ...(s.proc ? { pid: s.proc.pid } : {}),
      ...(s.port !== undefined ? { port: s.port } : {}),
      restarts: s.life.restarts,
      ...(s.life.error ? { error: s.life.error } : {}),
      ...downloadOf(s, this.opts.files, () => readTail(this.logFile(s.a.id), HUB_TAIL_BYTES)),
    }));
  }

  /** The model files of assigned (and stopping) shards: never evicted from the cache. */
  filesInUse(): Set<string> {
    return new Set([...this.shards.values(), ...this.retiring].flatMap((s) => (s.a.file ? [s.a.file.sha256.toLowerCase()] : [])));
  }

  /**
   * The end of a shard's log (at most `maxBytes`, whole lines), for `ctl logs`, with the
   * shard's key masked: the tail goes to the server and on to anyone who reads logs.
   */
  logTail(shardId: string, maxBytes = 16 * 1024): string {
    return redactSecrets(readTail(this.logFile(shardId), maxBytes), [this.shards.get(shardId)?.a.api_key]);
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

  // ---- the state machine -------------------------------------------------------------

  /** Feeds one event to the shard's state machine; tells the agent when its status changed. */
  private apply(s: Shard, event: ShardEvent): Decision {
    const before = s.life;
    const { life, decision } = step(before, event, this.policy);
    s.life = life;
    if (life.state !== before.state || life.error !== before.error) this.notify();
    return decision;
  }

  private carryOut(s: Shard, decision: Decision): void {
    switch (decision.type) {
      case 'none':
        return;
      case 'launch':
        void this.launch(s);
        return;
      case 'restart-after': {
        const epoch = s.epoch;
        this.clearTimer(s);
        s.timer = setTimeout(() => {
          if (epoch !== s.epoch || this.closed) return;
          this.carryOut(s, this.apply(s, { type: 'restart-due' }));
        }, decision.delayMs);
        s.timer.unref();
        this.persist();
        return;
      }
      case 'give-up':
        this.persist();
        return;
      case 'kill':
        // A start that takes too long is a failed start: the exit handler restarts it.
        this.log.warn({ shard: s.a.id, pid: s.proc?.pid }, decision.reason);
        if (s.proc) killGroupQuietly(s.proc.pgid, 'SIGKILL', this.log);
        return;
      case 'ready':
        this.log.info({ shard: s.a.id, port: s.port }, 'engine ready');
        return;
      case 'unhealthy':
        this.log.warn({ shard: s.a.id, problem: decision.problem }, 'ready engine stopped answering health checks');
        return;
    }
  }

  /** A failed launch or an exit: the state machine decides between a restart and giving up. */
  private failed(s: Shard, how: string): void {
    const logTail = lastLogLines(this.logFile(s.a.id), s.a.api_key);
    this.carryOut(s, this.apply(s, { type: 'exited', how, now: Date.now(), logTail }));
  }

  /** A model file that cannot be had: a bad digest fails the shard at once; a transfer that failed is retried like a crash. */
  private fileFailed(s: Shard, err: Error): void {
    if (isUnrunnable(err)) this.apply(s, { type: 'unrunnable', message: err.message });
    else this.carryOut(s, this.apply(s, { type: 'exited', how: err.message, now: Date.now(), logTail: '' }));
  }

  private startupTimeoutMs(s: Shard): number {
    return (s.a.startup_timeout_s ?? this.opts.defaultStartupTimeoutS) * 1000;
  }

  // ---- launching ---------------------------------------------------------------------

  private async launch(s: Shard): Promise<void> {
    const epoch = ++s.epoch;
    if (this.closed) return;
    const blocker = blockerOf(s, this.retiring);
    if (blocker) {
      s.waiting = true;
      this.apply(s, { type: 'waiting', blocker: blocker.a.id });
      return;
    }
    s.waiting = false;
    let a: ShardAssignment;
    try {
      a = await withModelFile(s, this.opts.files, this.opts.engineUser);
    } catch (err) {
      if (epoch === s.epoch && !this.closed) this.fileFailed(s, err as Error);
      return;
    }
    const port = await this.ports.reserve(s, (p) => this.portTaken(p));
    if (epoch !== s.epoch || this.closed) return;
    if (port === undefined) {
      this.failed(s, `no free port in ${this.ports.describe()}`);
      return;
    }
    let cmd: EngineCommand;
    try {
      cmd = buildCommand(a, { host: this.opts.bindHost, port, bins: this.opts.bins, allowCommandEngine: this.opts.allowCommandEngine });
    } catch (err) {
      // A command that cannot be built will not build on retry either.
      s.port = undefined;
      this.apply(s, { type: 'unrunnable', message: (err as Error).message });
      return;
    }
    s.http = cmd.http;
    try {
      this.start(s, epoch, cmd);
    } catch (err) {
      this.failed(s, `cannot start ${cmd.argv[0]}: ${(err as Error).message}`);
      return;
    }
    this.scheduleTick(s, epoch);
    this.persist();
    this.notify();
  }

  private start(s: Shard, epoch: number, cmd: EngineCommand): void {
    const file = this.logFile(s.a.id);
    writeLaunchMark(file, s.a.id, s.life.restarts, cmd.argv, s.a.api_key);
    const proc = spawnEngine(
      cmd.argv,
      cmd.env,
      file,
      {
        onExit: (how) => this.onExit(s, epoch, how),
        onSpawnError: (err) => this.onSpawnError(s, epoch, cmd.argv[0], err),
      },
      this.opts.engineUser,
      cmd.keyOnFd === true && s.a.api_key ? { dir: path.join(this.opts.stateDir, 'keys'), secret: s.a.api_key } : undefined,
    );
    if (!proc) return; // onSpawnError follows
    s.proc = proc;
    this.apply(s, { type: 'spawned', now: Date.now(), startupTimeoutMs: this.startupTimeoutMs(s) });
    this.log.info({ shard: s.a.id, pid: proc.pid, port: s.port, restarts: s.life.restarts }, 'engine started');
  }

  private onSpawnError(s: Shard, epoch: number, bin: string | undefined, err: Error): void {
    if (epoch !== s.epoch || this.closed) return;
    s.epoch++;
    this.clearTimer(s);
    this.failed(s, `cannot start ${bin}: ${err.message}`);
  }

  private onExit(s: Shard, epoch: number, how: string): void {
    if (epoch !== s.epoch || this.closed) return;
    s.epoch++;
    this.clearTimer(s);
    // Workers of a dead leader (vLLM's EngineCore, per-GPU processes) would keep GPU memory.
    if (s.proc) killGroupQuietly(s.proc.pgid, 'SIGKILL', this.log);
    this.log.warn({ shard: s.a.id, pid: s.proc?.pid }, `engine ${exitReason(s.life, how)}`);
    s.proc = undefined;
    this.failed(s, how);
  }

  /** Launches shards that waited for a stop to finish. */
  private kick(): void {
    for (const s of this.shards.values()) if (s.waiting && !blockerOf(s, this.retiring)) void this.launch(s);
  }

  private portTaken(port: number): boolean {
    for (const s of this.shards.values()) if (s.port === port) return true;
    for (const s of this.retiring) if (s.port === port) return true;
    return false;
  }

  // ---- health ------------------------------------------------------------------------

  private scheduleTick(s: Shard, epoch: number): void {
    this.clearTimer(s);
    s.timer = setTimeout(() => void this.tick(s, epoch), this.opts.healthIntervalMs);
    s.timer.unref();
  }

  /** One poll: liveness of an adopted engine, readiness or health, the startup deadline, the log size. */
  private async tick(s: Shard, epoch: number): Promise<void> {
    if (epoch !== s.epoch || this.closed || !s.proc) return;
    await boundLog(this.logFile(s.a.id), this.opts.logMaxBytes, this.log);
    if (epoch !== s.epoch || this.closed || !s.proc) return;
    const proc = s.proc;
    if (!proc.child && !isSameProcess(proc.pid, proc.startTime)) {
      this.onExit(s, epoch, 'exited (exit status unknown: the engine was adopted from an earlier agent)');
      return;
    }
    const problem = s.http ? await this.check(s) : null;
    if (epoch !== s.epoch || this.closed) return;
    this.carryOut(s, this.apply(s, { type: 'checked', problem, now: Date.now(), startupTimeoutMs: this.startupTimeoutMs(s) }));
    this.scheduleTick(s, epoch);
  }

  /** Adoption-time probe; then the regular polling takes over. */
  private async firstCheck(s: Shard): Promise<void> {
    const epoch = s.epoch;
    const problem = s.http ? await this.check(s) : null;
    if (epoch !== s.epoch || this.closed) return;
    this.apply(s, { type: 'adoption-checked', problem });
    this.scheduleTick(s, epoch);
  }

  /** Null when healthy; else why not. A starting engine must also list its served name. */
  private check(s: Shard): Promise<string | null> {
    const base = `http://${probeHost(this.opts.bindHost)}:${s.port}`;
    return probeEngine(base, s.a, s.life.state !== 'ready', probeTimeoutMs(this.opts.healthIntervalMs));
  }

  // ---- stopping ----------------------------------------------------------------------

  /** Takes a shard out of the assigned set and stops its engine, if any. */
  private retire(s: Shard): void {
    if (this.shards.get(s.a.id) === s) this.shards.delete(s.a.id);
    s.epoch++;
    s.waiting = false;
    s.unwanted?.abort();
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

  // ---- bookkeeping -------------------------------------------------------------------

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

  private logFile(id: string): string {
    return logPath(this.opts.stateDir, id);
  }

  /** Saves every shard that has a process, stopping ones included, for the next agent. */
  private persist(): void {
    const records: ShardRecord[] = [];
    for (const s of [...this.shards.values(), ...this.retiring]) {
      if (s.proc) records.push(toRecord({ ...s, proc: s.proc, restarts: s.life.restarts }, this.retiring.has(s)));
    }
    this.stateFile.save(records);
  }
}
