import os from 'node:os';
import { HTTPError, RequestError, type Got } from 'got';
import type { Logger } from 'pino';
import { AssignmentsReplySchema, formatFailure, HeartbeatReplySchema, tlsFailureHint, validate } from '@llmgw/shared';
import type { AssignmentsReply, CachedFile, HeartbeatReply, NodeReport, ShardAssignment, ShardStatus, TSchema, Static } from '@llmgw/shared';
import type { AgentAuth } from './credential.js';
import type { MachineProbe } from './probe/index.js';
import { isDown, ServerPool } from './servers.js';
import { serverClient } from './trust.js';

/** Reads a GGUF's header to estimate what serving it takes; undefined when there is no such file. */
export type SourceEstimator = (source: string) => Promise<NonNullable<NodeReport['source_estimates']>[number] | undefined>;

export const AGENT_VERSION = '0.1.0';

export interface AgentSettings {
  /**
   * The server's address, several comma-separated (instances of one control plane), or the
   * pool main shares with the join and model files: requests fail over between them.
   */
  server: string | ServerPool;
  /** The join secret (a full token's secret part; see `trust.ts`). */
  joinToken: string;
  /** The server's CA (PEM), the only trust anchor of every request; absent over plain HTTP. */
  ca?: string;
  nodeId: string;
  labels: Record<string, string>;
  pool?: string;
  advertiseAddr: string;
  heartbeatIntervalMs: number;
  /** GPUs and memory are probed at most this often; nvidia-smi is not free. */
  probeIntervalMs: number;
  /**
   * The node's credential (`NodeCredential`), which main always gives. Without it the
   * join token itself is sent, which today's servers refuse outside `/join`: only unit
   * tests against a fake server leave it out.
   */
  auth?: AgentAuth;
  /** Told to the server so that placement keeps `engine: command` profiles off a node that refuses them. */
  allowCommandEngine?: boolean;
  /**
   * How long a server that refuses connections counts as starting (or restarting): the
   * agent retries every half second and says so at info, with no error line, until then.
   * Default 30 s.
   */
  serverStartGraceS?: number;
  /** The files in the model cache (`NodeReport.files`), read at each report. */
  files?: () => CachedFile[];
  /** Where this start's heartbeat `seq` begins (`heartbeatSeqBase`); the clock in µs when absent. */
  seqBase?: number;
}

/** A connection not made by then is an instance that is not there: the next address is tried. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** Retry interval while the server is starting: it listens within a second or two. */
const START_RETRY_MS = 500;
/** Connection failures that mean "nothing listens there (yet)", not a wrong address or TLS. */
const NOT_LISTENING = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE']);

/** What the agent needs from the process supervisor. */
export interface ShardRunner {
  converge(assignments: ShardAssignment[]): void;
  statuses(): ShardStatus[];
  onChange(listener: () => void): void;
  logTail?(shardId: string): string;
}

/**
 * The agent's conversation with the server: a heartbeat every few seconds (node report
 * plus shard status, acknowledged with the GGUF sources the server wants sized), and a
 * long-poll, the one channel for assignments: it delivers the current ones at once after
 * a start, then each change as soon as the server makes it. Only the long-poll makes
 * the runner converge, and its replies arrive one after the other, so none can be
 * older than what the agent already runs.
 */
export class Agent {
  private probe?: MachineProbe;
  private probedAt = 0;
  /** The version of the assignments last applied; -1, which no server hands out, until the first. */
  private version = -1;
  private stopped = false;
  /** Set by the first heartbeat the server accepts, so "joined" is said once. */
  private joined = false;
  private beatTimer?: NodeJS.Timeout;
  private outageSince?: number;
  private lastProblem?: string;
  private readonly abort = new AbortController();
  private beating?: Promise<void>;
  private beatAgain = false;
  private estimateSources: string[] = [];
  /** Log tails the server has acknowledged, so each is sent once per change. */
  private sentTails = new Map<string, string>();
  /** Each shard's `fetched` as a heartbeat the server accepted carried it: said once, so a restarted server does not record it again. */
  private sentFetched = new Map<string, string>();
  /** Every request to the server: verified against `settings.ca` alone when there is one. */
  private readonly http: Got;
  /** The last bad reply's line per channel, so a server that keeps sending it is logged once, not per poll. */
  private readonly lastBadReply = new Map<string, string>();
  /** The outage so far is a server that does not listen yet, within the start grace. */
  private waitingForServer = false;
  /** Wakes the long-poll loop from its pause after a failure, once the server answers again. */
  private wakePoll?: () => void;
  /** The server's addresses: the one in use, and where to go when it fails. */
  private readonly servers: ServerPool;
  /** The last heartbeat's `seq`: each one sent, retries to another instance too, gets the next. */
  private seq: number;

  constructor(
    private readonly settings: AgentSettings,
    private readonly probeMachine: () => Promise<MachineProbe>,
    private readonly runner: ShardRunner,
    private readonly log: Logger,
    private readonly estimate: SourceEstimator = () => Promise.resolve(undefined),
  ) {
    runner.onChange(() => this.beatSoon());
    this.http = serverClient(settings.ca);
    this.servers = ServerPool.of(settings.server, log);
    this.seq = settings.seqBase ?? Date.now() * 1000;
  }

  /**
   * Joins: one heartbeat, then the first long-poll, which answers at once with the
   * current assignments — a restarted agent converges (re-adopting what still runs)
   * before this resolves, without waiting for a change.
   */
  async start(): Promise<void> {
    await this.beat();
    await this.poll();
    void this.pollLoop();
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    if (this.beatTimer) clearTimeout(this.beatTimer);
  }

  private beatSoon(): void {
    if (this.stopped) return;
    if (this.beating) {
      this.beatAgain = true;
      return;
    }
    if (this.beatTimer) clearTimeout(this.beatTimer);
    this.beatTimer = setTimeout(() => void this.beat(), 0);
  }

  private async beat(): Promise<void> {
    if (this.stopped) return;
    this.beating = this.sendHeartbeat();
    await this.beating;
    this.beating = undefined;
    if (this.stopped) return;
    const delay = this.beatAgain ? 0 : this.nextDelayMs();
    this.beatAgain = false;
    this.beatTimer = setTimeout(() => void this.beat(), delay);
  }

  /** Backs off while the server is unreachable, up to 30 s, so a dead server is not hammered. */
  private nextDelayMs(): number {
    const base = this.settings.heartbeatIntervalMs;
    if (this.outageSince === undefined) return base;
    if (this.waitingForServer) return Math.min(base, START_RETRY_MS);
    const down = Date.now() - this.outageSince;
    return Math.min(Math.max(base, down / 4), 30_000);
  }

  async report(): Promise<NodeReport> {
    const now = Date.now();
    if (!this.probe || now - this.probedAt >= this.settings.probeIntervalMs) {
      const p = await this.probeMachine();
      for (const w of p.warnings) if (!this.probe?.warnings.includes(w)) this.log.warn(w);
      this.probe = p;
      this.probedAt = now;
    }
    const p = this.probe;
    const estimates = (await Promise.all(this.estimateSources.map((src) => this.estimate(src).catch(() => undefined)))).filter(
      (e): e is NonNullable<typeof e> => e !== undefined,
    );
    return {
      node_id: this.settings.nodeId,
      hostname: os.hostname(),
      mgmt_addr: this.settings.advertiseAddr,
      agent_version: AGENT_VERSION,
      labels: this.settings.labels,
      ...(this.settings.pool ? { pool: this.settings.pool } : {}),
      ...(p.memoryTotalMb !== undefined ? { memory_total_mb: p.memoryTotalMb } : {}),
      cpu_cores: p.cpuCores,
      gpus: p.gpus,
      fabrics: p.fabrics,
      ...(p.gpuError ? { gpu_error: p.gpuError } : {}),
      estimated_sources: [...this.estimateSources],
      ...(estimates.length ? { source_estimates: estimates } : {}),
      allow_command_engine: this.settings.allowCommandEngine === true,
      ...(this.settings.files ? { files: this.settings.files() } : {}),
    };
  }

  private async sendHeartbeat(): Promise<void> {
    let authorization: string | undefined;
    try {
      const tails = new Map<string, string>();
      const fetched = new Map<string, string>();
      const shards = this.runner.statuses().map((status) => {
        const st = this.undelivered(status, fetched);
        const tail = this.runner.logTail?.(st.id);
        if (tail === undefined) return st;
        tails.set(st.id, tail);
        return this.sentTails.get(st.id) === tail ? st : { ...st, log_tail: tail };
      });
      // Taken when the state is read: what is read later is sent with a later seq.
      const seq = ++this.seq;
      const body = { report: await this.report(), shards, seq };
      authorization = await this.authorization();
      const auth = authorization;
      // A heartbeat carries the node's whole state: sending it again to another instance is harmless.
      const reply = await this.servers.request(
        (server, signal) =>
          this.http
            .post(`${server}/agent/v1/heartbeat`, {
              json: body,
              headers: { authorization: auth },
              timeout: { connect: CONNECT_TIMEOUT_MS, request: 10_000 },
              retry: { limit: 0 },
              signal,
            })
            .json<unknown>(),
        this.abort.signal,
      );
      this.sentTails = tails;
      this.sentFetched = fetched;
      this.recovered();
      const checked = this.checked(HeartbeatReplySchema, reply, 'heartbeat reply');
      if (checked) this.acknowledged(checked);
    } catch (err) {
      if (this.stopped) return;
      if (this.settings.auth && authorization && err instanceof HTTPError && err.response.statusCode === 401) {
        // The credential is gone (the node was deleted): the next beat joins again.
        this.settings.auth.rejected(authorization);
        this.beatAgain = true;
        return;
      }
      this.failed(err);
    }
  }

  /** `st` without a `fetched` the server already accepted; `fetched` collects what this heartbeat knows of. */
  private undelivered(st: ShardStatus, fetched: Map<string, string>): ShardStatus {
    if (!st.fetched) return st;
    const key = JSON.stringify(st.fetched);
    fetched.set(st.id, key);
    if (this.sentFetched.get(st.id) !== key) return st;
    const { fetched: _sent, ...rest } = st;
    return rest;
  }

  /** The header for heartbeats and polls: the node's credential (joining first if need be). */
  private authorization(): Promise<string> {
    return this.settings.auth ? this.settings.auth.header() : Promise.resolve(`Bearer ${this.settings.joinToken}`);
  }

  /** What the server wants looked up: a new list of sources is estimated and sent at once. */
  private acknowledged(reply: HeartbeatReply): void {
    const wanted = reply.estimate_sources ?? [];
    if (wanted.join('\n') === this.estimateSources.join('\n')) return;
    this.estimateSources = wanted;
    this.beatSoon();
  }

  private converge(reply: AssignmentsReply): void {
    if (reply.version === this.version) return;
    this.version = reply.version;
    this.runner.converge(reply.assignments);
  }

  /** One long-poll; false when it failed (the heartbeat loop reports outages). */
  private async poll(): Promise<boolean> {
    try {
      const authorization = await this.authorization();
      // A long-poll cut by its instance going away goes on at once against the next one.
      const reply = await this.servers.request(
        (server, signal) =>
          this.http(`${server}/agent/v1/nodes/${encodeURIComponent(this.settings.nodeId)}/assignments`, {
            searchParams: { after: this.version, wait_ms: 25_000 },
            headers: { authorization },
            timeout: { connect: CONNECT_TIMEOUT_MS, request: 35_000 },
            retry: { limit: 0 },
            signal,
          }).json<unknown>(),
        this.abort.signal,
      );
      if (this.stopped) return true;
      const checked = this.checked(AssignmentsReplySchema, reply, 'assignments reply');
      // A reply that does not parse is not a reason to stop engines either: keep what runs,
      // and wait before asking again, as after a failed poll, so a broken server is not hammered.
      if (!checked) return false;
      this.converge(checked);
      return true;
    } catch {
      return false;
    }
  }

  /** Long-polls for assignment changes for as long as the agent runs. */
  private async pollLoop(): Promise<void> {
    while (!this.stopped) {
      if (await this.poll()) continue;
      if (this.stopped) return;
      const pause = this.waitingForServer ? START_RETRY_MS : Math.max(1000, this.settings.heartbeatIntervalMs);
      await new Promise<void>((r) => {
        this.wakePoll = r;
        setTimeout(r, pause);
      });
      this.wakePoll = undefined;
    }
  }

  /**
   * The reply when it matches the shared schema, else undefined after one log line naming
   * the field at fault. The server is trusted for nothing it did not say in the agreed
   * shape: a reply an attacker or a broken server bent is ignored, and nothing is started
   * or stopped because of it. A reply for another node is just as wrong.
   */
  private checked<S extends TSchema>(schema: S, reply: unknown, what: string): Static<S> | undefined {
    const v = validate(schema, reply);
    const nodeId = v.ok ? (v.value as { node_id: string }).node_id : undefined;
    const problem = !v.ok ? formatFailure(v.error) : nodeId !== this.settings.nodeId ? `node_id is "${nodeId}", not ${this.settings.nodeId}` : undefined;
    if (problem === undefined) {
      this.lastBadReply.delete(what);
      return v.ok ? v.value : undefined;
    }
    const line = `ignored a bad ${what} from ${this.servers.current}: ${problem}; nothing was started or stopped because of it`;
    if (line !== this.lastBadReply.get(what)) this.log.error(line);
    this.lastBadReply.set(what, line);
    return undefined;
  }

  private recovered(): void {
    const downS = this.outageSince === undefined ? undefined : Math.round((Date.now() - this.outageSince) / 1000);
    if (this.joined) {
      if (downS !== undefined) this.log.info({ server: this.servers.current, down_s: downS }, 'reconnected to the server');
    } else if (this.lastProblem === undefined) {
      // Waiting for a server that was starting is not a problem: this is still the join.
      this.log.info({ server: this.servers.current, node: this.settings.nodeId, ...(downS !== undefined ? { waited_s: downS } : {}) }, 'joined the server');
    } else {
      this.log.info({ server: this.servers.current, down_s: downS }, 'reconnected to the server');
    }
    this.joined = true;
    this.outageSince = undefined;
    this.lastProblem = undefined;
    this.waitingForServer = false;
    this.wakePoll?.();
  }

  /** Logs once per distinct problem, not once per attempt. */
  private failed(err: unknown): void {
    // A failure that reaches here from an instance that is down means every address failed.
    const problem = describeFailure(err, isDown(err) ? this.servers.label : this.servers.current);
    if (this.outageSince === undefined) this.outageSince = Date.now();
    const graceMs = (this.settings.serverStartGraceS ?? 30) * 1000;
    const code = err instanceof RequestError && !(err instanceof HTTPError) ? err.code : undefined;
    // A server that is starting (the agent came up first, or it is restarting) refuses
    // connections for a moment: waited for quietly and quickly, not reported as an error.
    const wasWaiting = this.waitingForServer;
    this.waitingForServer = code !== undefined && NOT_LISTENING.has(code) && Date.now() - this.outageSince < graceMs;
    if (this.waitingForServer) {
      if (!wasWaiting) this.log.info({ server: this.servers.label, code }, `waiting for the server at ${this.servers.label} to start (${code})`);
      return;
    }
    if (problem !== this.lastProblem) {
      this.log.error(problem);
      this.lastProblem = problem;
    }
  }
}

export function describeFailure(err: unknown, server: string): string {
  if (err instanceof HTTPError) {
    const status = err.response.statusCode;
    let detail: string;
    try {
      detail = (JSON.parse(String(err.response.body)) as { error?: string }).error ?? '';
    } catch {
      detail = String(err.response.body).slice(0, 200);
    }
    if (status === 401) return `the server at ${server} rejected the join token (401 ${detail}): set LLMGW_JOIN_TOKEN to the server's join token; retrying`;
    if (status === 400) return `the server at ${server} rejected this node's report (400): ${detail}; retrying`;
    return `the server at ${server} answered ${status}: ${detail}; retrying`;
  }
  const tls = err instanceof RequestError ? tlsFailureHint(err.code, server, '--ca FILE (LLMGW_CA)') : undefined;
  if (tls) return `${tls}; retrying`;
  if (err instanceof RequestError) return `cannot reach the server at ${server} (${err.code}): check --server / LLMGW_SERVER; retrying with backoff`;
  return `heartbeat failed: ${(err as Error).message}; retrying`;
}
