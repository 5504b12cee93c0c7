import type { Command } from 'commander';
import type { EventList, EventView, NodeView } from '@llmgw/shared';
import { call, callAll, type Connection } from './client.js';
import { CtlError } from './failure.js';
import { safeJson } from './text.js';
import type { Io } from './tokens-cmd.js';

/** Seconds a watch's long-poll waits for news; under the client's 15 s request timeout. */
const WATCH_WAIT_S = 10;
const HEAD = ['AGE', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE'] as const;
/** Column widths a watch starts from, so later rows line up with the first ones. */
const MIN_WIDTHS = [4, 7, 17, 19];

/** How long ago, kubectl-style: `45s`, `12m`, `3h`, `2d`. */
export function age(time: string, now: Date): string {
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(time)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** The most of a message a table row shows; `-o json` has all of it. */
const MESSAGE_CHARS = 300;

/**
 * A message as one table cell: a crash's reason with its last log lines spans several
 * lines, which would break the columns. Its non-blank lines are joined with ` ⏎ ` and
 * the whole cut at `MESSAGE_CHARS`; `-o json` keeps the full text.
 */
export function oneLineMessage(message: string): string {
  const flat = message
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join(' ⏎ ');
  return flat.length > MESSAGE_CHARS ? `${flat.slice(0, MESSAGE_CHARS - 1)}…` : flat;
}

/** An event as the cells of its row. */
export function eventCells(e: EventView, now: Date): string[] {
  return [age(e.time, now), e.type, e.reason, e.object, oneLineMessage(e.message)];
}

/** Column widths for these rows: at least the header and `MIN_WIDTHS`; the message is never padded. */
export function widthsFor(rows: string[][]): number[] {
  return MIN_WIDTHS.map((min, i) => Math.max(min, HEAD[i]!.length, ...rows.map((r) => r[i]!.length)));
}

/** One line of the table: two spaces between columns, as `table()` draws them. */
export function eventLine(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((c, i) => (i < widths.length ? c.padEnd(widths[i]!) : c))
    .join('  ')
    .trimEnd();
}

/** The events as a table, oldest first, like `kubectl get events`. */
export function eventsTable(events: EventView[], now: Date, widths?: number[]): string {
  if (events.length === 0) return 'No events.';
  const rows = events.map((e) => eventCells(e, now));
  const w = widths ?? widthsFor(rows);
  return [eventLine(HEAD, w), ...rows.map((r) => eventLine(r, w))].join('\n');
}

function query(o: { node?: string; model?: string; limit?: string }, extra: Record<string, string> = {}): string {
  const p = new URLSearchParams();
  if (o.node) p.set('node', o.node);
  if (o.model) p.set('model', o.model);
  if (o.limit) p.set('limit', o.limit);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return p.size ? `?${p}` : '';
}

/**
 * `ctl events [--node N] [--model M] [-w]`: what operators did (who, what, when) and
 * what the reconciler decided (placed, replaced, drained, failed, scaled), oldest first.
 * `-w` keeps following: each new event is printed as it happens (with `-o json`, one
 * JSON object per line), until Ctrl-C.
 */
export function addEventsCommand(program: Command, io: Io): void {
  program
    .command('events')
    .description('what operators did and what the reconciler decided, oldest first (like kubectl get events)')
    .option('--node <node>', 'only events about this node')
    .option('--model <name>', 'only events about this model (name or alias)')
    .option('--limit <n>', 'at most this many of the newest events (default: 500)')
    .option('-w, --watch', 'after listing, print new events as they happen (Ctrl-C stops)')
    .addHelpText(
      'after',
      '\nExit codes: 0 listed (with -w: runs until Ctrl-C), 1 the server refused, 2 usage, 3 the server is unreachable.\n\nExample:\n  ctl events --node gpu-1 -w',
    )
    .action(async (o: { node?: string; model?: string; limit?: string; watch?: boolean }) => {
      if (o.limit !== undefined && !/^[1-9]\d*$/.test(o.limit)) throw new CtlError(`invalid --limit "${o.limit}": want a whole number >= 1`, 'usage');
      const { conn, json } = io.globals();
      const first = await call<EventList>(conn, 'GET', `/events${query(o)}`);
      // A mistyped node has no events either: say so, as ctl files --node does, rather
      // than "No events." (a deleted node's events are still listed; a watch may wait for one to join).
      if (!o.watch && o.node && first.events.length === 0) {
        // Every page: the first holds only the first 100 nodes.
        const nodes = await callAll<NodeView>(conn, '/nodes');
        if (!nodes.some((n) => n.id === o.node)) throw new CtlError(`no node "${o.node}" and no events about it (see ctl nodes)`);
      }
      if (!o.watch) return json ? io.printJson(first.events) : io.print(eventsTable(first.events, new Date()));
      await watch(conn, o, first, json, io);
    });
}

async function watch(conn: Connection, o: { node?: string; model?: string }, first: EventList, json: boolean, io: Io): Promise<never> {
  const now = new Date();
  const widths = widthsFor(first.events.map((e) => eventCells(e, now)));
  const show = (events: EventView[], at: Date) => {
    for (const e of events) io.print(json ? safeJson(e) : eventLine(eventCells(e, at), widths));
  };
  if (!json) io.print(eventLine(HEAD, widths));
  show(first.events, now);
  let cursor = first.cursor;
  for (;;) {
    const next = await call<EventList>(conn, 'GET', `/events${query(o, { since: String(cursor), wait_s: String(WATCH_WAIT_S) })}`);
    show(next.events, new Date());
    cursor = next.cursor;
  }
}
