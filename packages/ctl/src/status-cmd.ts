import type { Command } from 'commander';
import { lastSeenText, type StatusInstance, type StatusView } from '@llmgw/shared';
import { call } from './client.js';
import { CtlError, refusedWith } from './failure.js';
import { table } from './render.js';
import { age } from './tables.js';
import type { Io } from './tokens-cmd.js';
import { examples } from './usage.js';

/** A time as the operator's clock shows it, to the second: `2026-03-01 13:00:30`. */
export function localTime(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Whole seconds from an ISO time to `now`; a time ahead of this machine's clock (clocks disagree) is 0. */
function secondsSince(iso: string, now: Date): number {
  return Math.max(0, Math.floor((now.getTime() - Date.parse(iso)) / 1000));
}

/** The line above the table: the store, and who leads since when (or that nobody does). */
export function statusLine(v: StatusView, now: Date): string {
  if (v.store === 'sqlite') return 'Store: sqlite (one instance)';
  const { instance, epoch, since } = v.leader;
  if (instance === undefined) {
    return `Store: postgres · no leader: no instance holds the lease (last epoch ${epoch}) — one of the instances takes it within a lease term (2 s by default); if this lasts, they cannot write to the database: see their logs`;
  }
  const when = since !== undefined ? ` since ${localTime(new Date(since))} (${age(secondsSince(since, now))} ago)` : '';
  return `Store: postgres · leader ${instance} (epoch ${epoch})${when}`;
}

function catalogText(c: StatusInstance['catalog']): string {
  if (!c) return '-';
  const text = `${c.digest.slice(0, 12)} (${c.models} model${c.models === 1 ? '' : 's'})`;
  if (c.error === undefined) return text;
  const err = c.error.replace(/\s*\n\s*/g, ' | ');
  return `${text}, reload failed: ${err.length > 60 ? `${err.slice(0, 59)}…` : err}`;
}

/** The instances, oldest first: the leader marked `*`, the one that answered `(answering)`. */
export function instancesTable(v: StatusView, now: Date): string {
  if (v.instances.length === 0) return 'No instances are registered.';
  return table(
    ['ID', 'ADMIN URL', 'CLIENT URL', 'LEADER', 'AGE', 'LAST SEEN', 'CATALOG', 'VERSION'],
    v.instances.map((i) => [
      i.self ? `${i.id} (answering)` : i.id,
      i.admin_url ?? '-',
      i.client_url ?? '-',
      i.leader ? '*' : '',
      age(secondsSince(i.started, now)),
      lastSeenText({ last_seen_s: i.last_seen_s }),
      catalogText(i.catalog),
      i.version ?? '-',
    ]),
  );
}

/** A line under the table when the instances do not serve the same catalog (a reload that reached only some). */
export function catalogMismatch(v: StatusView): string {
  const digests = new Set(v.instances.flatMap((i) => (i.catalog ? [i.catalog.digest] : [])));
  if (digests.size < 2) return '';
  return `The instances serve different catalogs (${v.instances.map((i) => `${i.id}: ${i.catalog?.digest.slice(0, 12) ?? '-'}`).join(', ')}): give them the same catalog file.`;
}

/** Everything `ctl status` prints in table mode. */
export function statusText(v: StatusView, now: Date): string {
  const mismatch = catalogMismatch(v);
  return `${statusLine(v, now)}\n${instancesTable(v, now)}${mismatch ? `\n\n${mismatch}` : ''}`;
}

/** `ctl status`: the store, the server instances on it and the leader among them (GET /api/v1/status). */
export function addStatusCommand(program: Command, io: Io): void {
  examples(
    program
      .command('status')
      .description('show the store, the server instances on it and which one leads, since when (GET /api/v1/status)')
      .action(async () => {
        const { conn, json } = io.globals();
        let v: StatusView;
        try {
          v = await call<StatusView>(conn, 'GET', '/status');
        } catch (e) {
          // A server older than GET /api/v1/status still answers everything else.
          if (refusedWith(e, 'no_route', 404))
            throw new CtlError(
              `${conn.servers.current} predates GET /api/v1/status: it is one instance on SQLite, its own leader (ctl version shows its version)`,
              'failed',
              404,
              'no_route',
            );
          throw e;
        }
        if (json) return io.printJson(v);
        io.print(statusText(v, new Date()));
      }),
    'ctl status',
    'ctl status -o json | jq -r \'.leader.instance // "no leader"\'',
  );
}
