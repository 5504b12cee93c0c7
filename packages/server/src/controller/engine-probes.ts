import http from 'node:http';

/** An engine to probe: a ready replica's endpoint and its engine key. */
export interface ProbeTarget {
  readonly replicaId: string;
  readonly endpoint: string;
  readonly apiKey: string;
}

/** One probe of an engine's health endpoint: resolves true when it answered 200 within `timeoutMs`. */
export type ProbeEngine = (target: ProbeTarget, timeoutMs: number) => Promise<boolean>;

export interface EngineProbeOptions {
  /** How often an engine whose agent went quiet is probed (ms). */
  intervalMs: number;
  /** The engines to probe now: ready replicas with a shard on a node that went quiet. */
  targets: () => readonly ProbeTarget[];
  /** Told when the set of engines that answer changed, so routes follow. */
  changed: () => void;
  probe?: ProbeEngine;
  now?: () => number;
}

interface Record {
  /** When the last probe that answered 200 was sent; undefined after a failed one. */
  okAtMs?: number;
  /** Failed probes in a row: the next probe waits `intervalMs × 2^failures` (at most 32×). */
  failures: number;
  nextAtMs: number;
}

/** The most a failing engine's probes back off to, in probe intervals. */
const MAX_BACKOFF = 32;

/**
 * The server's own view of engines whose agent went quiet (issue 28): each is probed at
 * its health endpoint (`GET /health` with the engine key, from the server) every
 * `intervalMs`, so the gateway can keep routing to an engine that serves while its agent
 * is down. An engine answers while its last probe, sent within three intervals, got a
 * 200; a failed probe or one that timed out ejects it at once, and the next probe backs
 * off (interval × 2, 4, … up to 32) until one answers again. The agent's heartbeat stays
 * the first word: engines of nodes that report are not probed at all.
 */
export class EngineProbes {
  private readonly records = new Map<string, Record>();
  private timer?: NodeJS.Timeout;
  private running = false;
  private answering = '';
  private readonly probe: ProbeEngine;
  private readonly now: () => number;

  constructor(private readonly o: EngineProbeOptions) {
    this.probe = o.probe ?? probeHealth;
    this.now = o.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.round(), this.o.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Whether the engine of `replicaId` answered its last probe, sent within three intervals. */
  answers(replicaId: string, nowMs: number): boolean {
    const r = this.records.get(replicaId);
    return r?.okAtMs !== undefined && nowMs - r.okAtMs <= 3 * this.o.intervalMs;
  }

  /** A request to the engine failed: it is ejected until a probe answers again. */
  failed(replicaId: string): void {
    const r = this.records.get(replicaId);
    if (!r || r.okAtMs === undefined) return;
    delete r.okAtMs;
    r.failures = Math.min(r.failures + 1, 5);
    r.nextAtMs = this.now() + this.o.intervalMs * (2 ** r.failures - 0.5);
    this.settle();
  }

  /** Probes every engine that is due, then tells `changed` if the answering ones differ. */
  async round(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const targets = this.o.targets();
      const ids = new Set(targets.map((t) => t.replicaId));
      for (const id of [...this.records.keys()]) if (!ids.has(id)) this.records.delete(id);
      const sentAt = this.now();
      await Promise.all(
        targets.map(async (t) => {
          const r = this.records.get(t.replicaId) ?? { failures: 0, nextAtMs: 0 };
          this.records.set(t.replicaId, r);
          if (sentAt < r.nextAtMs) return;
          const ok = await this.probe(t, Math.max(1, Math.floor(this.o.intervalMs * 0.8))).catch(() => false);
          if (ok) {
            r.okAtMs = sentAt;
            r.failures = 0;
          } else {
            delete r.okAtMs;
            r.failures = Math.min(r.failures + 1, 5);
          }
          // Half an interval early, so a round that starts a little late still sends it.
          r.nextAtMs = sentAt + this.o.intervalMs * (Math.min(MAX_BACKOFF, 2 ** r.failures) - 0.5);
        }),
      );
    } finally {
      this.running = false;
      this.settle();
    }
  }

  /** Tells `changed` when the engines that answer now are not the ones that did. */
  private settle(): void {
    const nowMs = this.now();
    const answering = [...this.records.keys()]
      .filter((id) => this.answers(id, nowMs))
      .sort()
      .join();
    if (answering === this.answering) return;
    this.answering = answering;
    this.o.changed();
  }
}

/** `GET <endpoint>/health` with the engine key: true on a 200 within `timeoutMs`. */
export const probeHealth: ProbeEngine = (target, timeoutMs) =>
  new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.get(`${target.endpoint}/health`, { headers: { authorization: `Bearer ${target.apiKey}` }, timeout: timeoutMs, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
    } catch {
      resolve(false);
      return;
    }
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
