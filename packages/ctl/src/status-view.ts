import { lastSeenText, type StatusInstance, type StatusView } from '@llmgw/shared';
import { table } from './render.js';
import { age } from './tables.js';

/** What `ctl status` prints in table mode, loaded when it runs (with cli-table3: issue 32). */

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
