import type { Command } from 'commander';
import type { NodeStateReply, NodeView } from '@llmgw/shared';
import { call, callAll, type Connection } from './client.js';
import { CtlError } from './failure.js';
import type { Io } from './tokens-cmd.js';
import { terminalSafe } from './text.js';
import { examples } from './usage.js';
import { elapsed, waitUntil, type Look, type WaitIo } from './wait.js';

/** `90s`, `10m`, `2h` or plain seconds → seconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text.trim());
  if (!m) throw new CtlError(`invalid ${flag} "${text}": want a duration like 90s, 10m or 2h`, 'usage');
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[(m[2] ?? 's') as 's' | 'm' | 'h'];
}

/** A duration as the operator wrote it, with its unit: plain seconds (`--timeout 5`) read `5s`. */
export function durationText(text: string): string {
  const t = text.trim();
  return /^\d+(?:\.\d+)?$/.test(t) ? `${t}s` : t;
}

export { elapsed };

export interface DrainWatch extends WaitIo {
  node: string;
  fetchNode(): Promise<NodeView | undefined>;
}

/**
 * Waits for a draining node to be empty (`waitUntil`); fails at once when the node went
 * away or its drain was cancelled, and at the timeout with what is blocking.
 */
export function waitForDrain(w: DrainWatch): Promise<NodeView> {
  let held = 0;
  return waitUntil<NodeView>(
    w,
    async (): Promise<Look<NodeView>> => {
      const n = await w.fetchNode();
      if (!n) throw new CtlError(`node ${w.node} disappeared`);
      if (n.state !== 'draining') throw new CtlError(`node ${w.node} is ${n.state} now; the drain was cancelled`);
      if (n.replicas === 0) return { done: n };
      held = n.replicas;
      return { status: n.drain_status ?? `${n.replicas} left` };
    },
    'still draining',
    (status) => new CtlError(`node ${w.node} still holds ${held} shard(s) after ${w.timeoutText}: ${status} (the drain goes on; see ctl nodes)`),
  );
}

function setState(conn: Connection, node: string, body: Record<string, unknown>): Promise<NodeStateReply> {
  return call<NodeStateReply>(conn, 'POST', `/nodes/${encodeURIComponent(node)}/state`, body);
}

const REASON_HELP = 'why, shown in ctl nodes and kept with the state (default: keep the reason already given)';

/** `ctl cordon`, `ctl uncordon`, `ctl drain`: a node's admin state, as kubectl's verbs. */
export function addNodeStateCommands(program: Command, io: Io): void {
  examples(
    program
      .command('cordon <node>')
      .description('stop placing new replicas on a node (running ones stay); a cordoned node keeps its reason unless --reason gives a new one')
      .option('--reason <text>', REASON_HELP)
      .action(async (node: string, o: { reason?: string }) => {
        const { conn, json } = io.globals();
        const res = await setState(conn, node, { state: 'cordon', ...(o.reason ? { reason: o.reason } : {}) });
        if (json) return io.printJson(res);
        // The kept reason is news only when nothing changed: the operator may not know it.
        io.print(res.already ? `node/${res.id} already cordoned${res.reason ? ` (reason: ${res.reason})` : ''}` : `node/${res.id} cordoned`);
      }),
    'ctl cordon gpu-3 --reason "PSU swap"',
    'ctl cordon gpu-3        # again: node/gpu-3 already cordoned (reason: PSU swap)',
  );

  examples(
    program
      .command('uncordon <node>')
      .description('make a node schedulable again (ends a drain too)')
      .action(async (node: string) => {
        const { conn, json } = io.globals();
        const res = await setState(conn, node, { state: 'uncordon' });
        if (json) return io.printJson(res);
        io.print(`node/${res.id} ${res.already ? 'already uncordoned' : 'uncordoned'}`);
      }),
    'ctl uncordon gpu-3',
  );

  examples(
    program
      .command('drain <node>')
      .description(
        'move replicas off a node, each replacement started and ready before the old one stops; then keep it empty. Waits until the node is empty, printing progress, unless --no-wait',
      )
      .option('--reason <text>', REASON_HELP)
      .option('--deadline <duration>', 'after this long (e.g. 10m), stop what is left without waiting for replacements (default: no deadline)')
      .option('--force', 'stop replicas at once, without starting replacements first')
      .option('--no-wait', 'return at once instead of waiting for the node to be empty')
      .option('--timeout <duration>', 'give up waiting after this long and exit 1 with what blocks (the drain goes on)', '30m')
      .option('--progress-every <duration>', 'while nothing changes, print the status with the elapsed time this often', '10s')
      .action(async (node: string, o: { reason?: string; deadline?: string; force?: boolean; wait: boolean; timeout: string; progressEvery: string }) => {
        const { conn, json } = io.globals();
        // Every flag is read before the drain is asked for: a typo must not start one.
        const timeoutMs = parseDuration(o.timeout, '--timeout') * 1000;
        const progressEveryMs = parseDuration(o.progressEvery, '--progress-every') * 1000;
        const body = {
          state: 'drain',
          ...(o.reason ? { reason: o.reason } : {}),
          ...(o.deadline ? { deadline_s: parseDuration(o.deadline, '--deadline') } : {}),
          ...(o.force ? { force: true } : {}),
        };
        const res = await setState(conn, node, body);
        const line = `node/${res.id} ${res.already ? 'already draining' : 'draining'}`;
        if (!o.wait) return json ? io.printJson(res) : io.print(line);
        if (!json) io.print(line);
        const n = await waitForDrain({
          node: res.id,
          timeoutMs,
          timeoutText: durationText(o.timeout),
          progressEveryMs,
          pollMs: 1000,
          fetchNode: async () => (await callAll<NodeView>(conn, '/nodes')).find((x) => x.id === res.id),
          now: () => Date.now(),
          sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
          progress: (l) => {
            if (!json) process.stderr.write(`${terminalSafe(l)}\n`);
          },
        });
        return json ? io.printJson(n) : io.print(`node/${res.id} drained`);
      }),
    'ctl drain gpu-3 --reason "kernel upgrade"',
    'ctl drain gpu-3 --deadline 10m --timeout 15m',
    'ctl drain gpu-3 --no-wait && ctl nodes   # the drain status is in the lines under the table',
  );
}
