import type { Command } from 'commander';
import type { RolloutView } from '@llmgw/shared';
import { call, type Connection } from './client.js';
import { CtlError } from './failure.js';
import { durationText, parseDuration } from './node-state-cmd.js';
import { waitUntil, type Look, type WaitIo } from './wait.js';
import type { Io } from './tokens-cmd.js';
import { examplesText } from './usage.js';

/** How often `ctl rollout status` asks while it waits, and prints where it stands at least. */
const POLL_MS = 1000;
const PROGRESS_EVERY_MS = 15_000;

/** One line for where a rollout stands: `2 of 2 replicas at revision 3f2a…, 1 ready, 1 old left`. */
export function rolloutLine(v: RolloutView): string {
  const head = `${v.updated} of ${v.replicas} replicas at revision ${v.revision}, ${v.ready} ready${v.outdated ? `, ${v.outdated} of an earlier revision` : ''}`;
  return v.reason ? `${head} (${v.state}: ${v.reason})` : `${head} (${v.state})`;
}

export interface RolloutWatch extends WaitIo {
  model: string;
  fetch(): Promise<RolloutView>;
}

/**
 * Waits, like `kubectl rollout status`, until every replica runs the catalog's revision
 * and is ready (`waitUntil`); fails at once when the rollout is halted, and at the
 * timeout with where it stands.
 */
export function waitForRollout(w: RolloutWatch): Promise<RolloutView> {
  return waitUntil<RolloutView>(
    w,
    async (): Promise<Look<RolloutView>> => {
      const v = await w.fetch();
      if (v.state === 'complete') return { done: v };
      if (v.state === 'halted')
        throw new CtlError(
          `rollout of ${w.model} to revision ${v.revision} halted: ${v.reason ?? 'unknown'} (the old revision keeps serving; fix the catalog, or ctl rollout resume ${w.model} to try again)`,
        );
      return { status: rolloutLine(v) };
    },
    'still rolling',
    (status) => new CtlError(`rollout of ${w.model} not complete after ${w.timeoutText}: ${status}`),
  );
}

const path = (model: string, tail = '') => `/models/${encodeURIComponent(model)}/rollout${tail}`;
const get = (conn: Connection, model: string) => call<RolloutView>(conn, 'GET', path(model));

/**
 * `ctl rollout status|history|pause|resume <model>`: a changed model's replicas are
 * replaced start-before-stop (the catalog's `rollout:`); these watch and steer it.
 */
export function addRolloutCommands(program: Command, io: Io): void {
  const rollout = program
    .command('rollout')
    .description("watch and steer how a model's replicas move to its new revision after a catalog change (status, history, pause, resume)");

  rollout
    .command('status <model>')
    .description('wait until every replica runs the current revision and is ready, printing progress; exit 1 when halted or past --timeout')
    .option('--timeout <duration>', 'give up waiting after this long and exit 1 with where it stands (the rollout goes on)', '10m')
    .option('--no-wait', 'print where it stands once; exit 0 only when complete')
    .addHelpText(
      'after',
      `\nExit codes: 0 complete, 1 halted, not complete in time (or with --no-wait, not complete), 2 usage, 3 the server is unreachable.${examplesText('ctl rollout status qwen-coder-14b', 'ctl rollout status qwen-coder-14b --timeout 5m')}`,
    )
    .action(async (model: string, o: { timeout: string; wait: boolean }) => {
      const timeoutMs = parseDuration(o.timeout, '--timeout') * 1000;
      const { conn, json } = io.globals();
      if (!o.wait) {
        const v = await get(conn, model);
        if (json) io.printJson(v);
        else io.print(`${v.model}: ${rolloutLine(v)}`);
        if (v.state !== 'complete') throw new CtlError(`rollout of ${v.model} is ${v.state}${v.reason ? `: ${v.reason}` : ''}`);
        return;
      }
      const v = await waitForRollout({
        model,
        timeoutMs,
        timeoutText: durationText(o.timeout),
        progressEveryMs: PROGRESS_EVERY_MS,
        pollMs: POLL_MS,
        fetch: () => get(conn, model),
        now: Date.now,
        sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
        progress: (line) => (json ? undefined : io.print(line)),
      });
      if (json) io.printJson(v);
      else io.print(`rollout of ${v.model} to revision ${v.revision} complete: ${v.ready} of ${v.replicas} replicas ready`);
    });

  rollout
    .command('history <model>')
    .description('the revisions of a model, oldest first, with when each became current and what changed')
    .addHelpText('after', examplesText('ctl rollout history qwen-coder-14b'))
    .action(async (model: string) => {
      const { conn, json } = io.globals();
      const v = await get(conn, model);
      if (json) return io.printJson(v.history);
      const { historyTable } = await import('./tables.js');
      io.print(historyTable(v));
    });

  for (const [verb, what] of [
    ['pause', 'stop replacing replicas (those starting finish; nothing more is replaced) until ctl rollout resume'],
    ['resume', 'go on after a pause or pause_after, or try a halted revision again'],
  ] as const) {
    rollout
      .command(`${verb} <model>`)
      .description(what)
      .addHelpText('after', examplesText(`ctl rollout ${verb} qwen-coder-14b`))
      .action(async (model: string) => {
        const { conn, json } = io.globals();
        const v = await call<RolloutView>(conn, 'POST', path(model, `/${verb}`), {});
        if (json) return io.printJson(v);
        io.print(`rollout of ${v.model} ${verb === 'pause' ? 'paused' : 'resumed'}: ${rolloutLine(v)}`);
      });
  }
}
