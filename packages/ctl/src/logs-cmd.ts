import type { Command } from 'commander';
import { call } from './client.js';
import { refusedWith } from './failure.js';
import type { Io } from './tokens-cmd.js';
import { examples } from './usage.js';

interface LogReply {
  replica: string;
  shard: string;
  node: string;
  log: string;
}

function lines(text: string): string[] {
  const l = text.split('\n');
  if (l.at(-1) === '') l.pop();
  return l;
}

/**
 * The lines of `after` that `before` did not show. Both are the end of one log in whole
 * lines (the agent sends its last 16 KiB), so the window may have slid: the overlap is
 * the longest start of `after` that ends `before`, found with KMP's failure function.
 * Without offsets, a slid window of identical lines can hide a repeat; no overlap at all
 * (a new log) shows `after` whole.
 */
export function newLines(before: string, after: string): string[] {
  const a = lines(after);
  const b = lines(before);
  if (a.length === 0) return [];
  const fail = new Array<number>(a.length).fill(0);
  for (let i = 1, k = 0; i < a.length; i++) {
    while (k > 0 && a[i] !== a[k]) k = fail[k - 1]!;
    if (a[i] === a[k]) k++;
    fail[i] = k;
  }
  let q = 0;
  for (const line of b) {
    if (q === a.length) q = fail[q - 1]!;
    while (q > 0 && line !== a[q]) q = fail[q - 1]!;
    if (line === a[q]) q++;
  }
  return a.slice(q);
}

/** `ctl logs <replica> [--rank N] [-f]`: the end of an engine's log, and with -f what follows. */
export function addLogsCommand(program: Command, io: Io): void {
  examples(
    program
      .command('logs <replica>')
      .description(
        "show the end of a replica's engine log, as its agent last sent it (every heartbeat); -f keeps printing new lines until Ctrl-C or the replica is gone",
      )
      .option('--rank <n>', 'which shard of a multi-node replica', '0')
      .option('-f, --follow', 'keep printing lines as the agent sends them')
      .action(async (replica: string, o: { rank: string; follow?: boolean }) => {
        const { conn, json } = io.globals();
        const get = () => call<LogReply>(conn, 'GET', `/replicas/${encodeURIComponent(replica)}/logs?rank=${encodeURIComponent(o.rank)}`);
        let res = await get();
        if (json && !o.follow) return io.printJson(res);
        const show = (ls: string[]) => {
          for (const l of ls) io.print(json ? JSON.stringify({ replica: res.replica, node: res.node, line: l }) : l);
        };
        show(newLines('', res.log));
        if (!o.follow) return;
        for (;;) {
          await new Promise((r) => setTimeout(r, 1000));
          let next: LogReply;
          try {
            next = await get();
          } catch (e) {
            // kubectl logs -f ends when its container does: a replaced or removed replica is the end.
            if (refusedWith(e, 'not_found', 404)) {
              process.stderr.write(`replica ${replica} is gone (replaced or removed): see ctl replicas\n`);
              return;
            }
            throw e;
          }
          show(newLines(res.log, next.log));
          res = next;
        }
      }),
    'ctl logs r-9e4e6440',
    'ctl logs r-9e4e6440 --rank 1      # the second node of a sharded replica',
    'ctl logs -f r-9e4e6440            # follow; -o json: one {"replica","node","line"} per line',
  );
}
