import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Model } from '@llmgw/shared';
import { ACTIVE_REPLICA_STATES } from '../domain.js';
import type { GatewayController } from './controller-view.js';
import type { Traffic } from './traffic.js';
import { write } from './sse.js';
import type { LeaveSignal } from './client-left.js';

/**
 * A request for a model with `min: 0` and no replica at all starts one and waits for it.
 * The number of requests waiting per model (counted in `Traffic`) is what the autoscaler
 * reads to start the first replica (and not scale back to zero under them).
 */
export class ColdStart {
  constructor(
    private readonly ctl: GatewayController,
    private readonly traffic: Traffic,
    private readonly settings: { keepAliveMs: number; coldStartTimeoutMs: number },
    private readonly log: Logger,
  ) {}

  /** Whether a request for `model` must start a replica: `min: 0` and none active. */
  needed(model: Model): boolean {
    if ((model.scaling?.min ?? 1) !== 0) return false;
    return !this.ctl.listReplicas().some((r) => r.model === model.name && ACTIVE_REPLICA_STATES.has(r.state));
  }

  /**
   * Headers now and comments while the replica starts, for a streaming client: clients
   * and proxies keep the connection instead of timing out.
   */
  openStream(res: ServerResponse, model: string): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-llmgw-model': model });
    res.write(': keep-alive\n\n');
  }

  /**
   * Asks for a replica and waits until one is ready, placement fails, the client leaves
   * or the cold-start timeout passes. Returns why it gave up (when it did).
   */
  async wait(model: Model, res: ServerResponse, stream: boolean, signal: LeaveSignal): Promise<string> {
    this.traffic.waitStarted(model.name);
    const started = Date.now();
    const keepAlive = stream ? setInterval(() => write(res, ': keep-alive\n\n'), this.settings.keepAliveMs) : undefined;
    this.log.info({ model: model.name }, 'request for a model at zero replicas; starting one');
    this.ctl.notify();
    try {
      for (;;) {
        if (this.ctl.routes(model.name).length > 0) return '';
        if (signal.aborted) return 'client left';
        const why = this.gaveUp(model, started);
        if (why !== undefined) return why;
        await this.change(signal);
      }
    } finally {
      if (keepAlive) clearInterval(keepAlive);
      this.traffic.waitEnded(model.name);
    }
  }

  /** Why waiting longer for a replica is pointless, or undefined while it is not. */
  private gaveUp(model: Model, started: number): string | undefined {
    const attempt = this.ctl.lastAttempt(model.name);
    const replicas = this.ctl.listReplicas();
    const placed = replicas.some((r) => r.model === model.name && ACTIVE_REPLICA_STATES.has(r.state));
    if (attempt && attempt.atMs >= started && !attempt.outcome.placement && !placed) return `cannot be placed: ${attempt.outcome.summary}`;
    const failed = replicas.find((r) => r.model === model.name && r.state === 'failed' && r.createdAtMs >= started);
    if (failed) return `the replica started for this request failed: ${failed.error ?? 'unknown error'}`;
    if (Date.now() - started >= this.settings.coldStartTimeoutMs)
      return `no replica was ready within ${this.settings.coldStartTimeoutMs / 1000}s of starting one`;
    return undefined;
  }

  /** Resolves on the next replica change, the client leaving, or after 250 ms, whichever is first. */
  private change(signal: LeaveSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.ctl.events.off('replicas', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, 250);
      this.ctl.events.on('replicas', done);
      signal.addEventListener('abort', done);
    });
  }
}
