import type { ChalkInstance } from 'chalk';
import {
  downloadText,
  lastSeenText,
  nodeStateWords,
  type ExplainView,
  type KeyView,
  type ModelView,
  type NodeFileView,
  type NodeView,
  type RejectionView,
  type RolloutView,
  type ReplicaView,
  type TokenView,
  type UsageRow,
} from '@llmgw/shared';
import { CtlError } from './failure.js';
import { table } from './render.js';

/** Pure renderers from API objects to text, so they are tested without a server. */

export function nodesTable(nodes: NodeView[], c: ChalkInstance): string {
  if (nodes.length === 0) return 'No nodes have joined yet. Start llmgw-agent on a machine (see README: joining a machine).';
  return table(
    ['NAME', 'STATE', 'GPUS', 'CLASS', 'MEM(GiB)', 'FABRICS', 'REPLICAS', 'LAST SEEN', 'VERSION'],
    nodes.map((n) => [
      n.id,
      nodeState(n, c),
      gpus(n, c),
      n.gpu_classes.join(',') || '-',
      // `-`, not 0: an agent that did not report memory is not a small machine.
      n.memory_gb === undefined ? '-' : String(n.memory_gb),
      n.fabrics.join(',') || '-',
      n.replicas,
      lastSeenText(n),
      n.agent_version ?? '-',
    ]),
  );
}

function nodeState(n: NodeView, c: ChalkInstance): string {
  // The words the dashboard shows too (nodeStateWords in @llmgw/shared).
  const text = nodeStateWords(n).join(',');
  if (n.liveness !== 'ready' || n.suspect !== undefined) return c.red(text);
  if (n.state !== 'ready') return c.yellow(text);
  return c.green(text);
}

function gpus(n: NodeView, c: ChalkInstance): string {
  // A node waiting for approval keeps only its identity: its GPUs are not known, not zero.
  if (n.state === 'pending-approval') return '-';
  const text = `${n.gpu_free}/${n.gpu_total}`;
  if (n.gpu_error) return c.red(`${text}!`);
  return n.unhealthy_gpus.length ? c.yellow(text) : text;
}

export function nodeDetails(nodes: NodeView[]): string {
  const lines: string[] = [];
  for (const n of nodes) {
    for (const u of n.unhealthy_gpus) lines.push(`${n.id}: ${u}`);
    if (n.gpu_error) lines.push(`${n.id}: ${n.gpu_error}`);
    if (n.state !== 'ready' && n.state_reason) lines.push(`${n.id}: ${n.state} (${n.state_reason})`);
    if (n.drain_status) lines.push(`${n.id}: ${n.drain_status}${n.drain_deadline ? ` (deadline ${n.drain_deadline})` : ''}`);
    if (n.replacement_paused) lines.push(`${n.id}: ${n.replacement_paused}`);
    if (n.suspect) lines.push(`${n.id}: suspect: ${n.suspect}`);
  }
  return lines.join('\n');
}

export function modelsTable(models: ModelView[], c: ChalkInstance): string {
  if (models.length === 0) return 'The catalog has no models. Start the server with --catalog FILE.';
  return table(
    ['NAME', 'READY', 'UP-TO-DATE', 'MIN', 'MAX', 'PROFILES', 'ALIASES', 'FALLBACKS', 'ROUTING', 'ADAPTERS', 'REVISION'],
    models.map((m) => [
      m.name,
      m.ready_replicas >= m.min_replicas ? `${m.ready_replicas}/${m.total_replicas}` : c.yellow(`${m.ready_replicas}/${m.total_replicas}`),
      // A rollout that is not moving says so in the column operators watch.
      m.rollout === 'halted' || m.rollout === 'waiting' || m.rollout === 'paused' ? c.yellow(`${m.up_to_date ?? 0} (${m.rollout})`) : (m.up_to_date ?? '-'),
      m.min_replicas,
      m.max_replicas,
      m.profiles.join(','),
      m.aliases.join(',') || '-',
      m.fallbacks.join(',') || '-',
      m.routing,
      m.adapters?.length ?? '-',
      m.revision ?? '-',
    ]),
  );
}

/**
 * The models' LoRA adapters, one line each (`ctl models MODEL`, `ctl models -o wide`): the
 * base, the adapter, its source and the replicas that hold it loaded; empty when none has any.
 */
export function adaptersTable(models: ModelView[]): string {
  const rows = models.flatMap((m) => (m.adapters ?? []).map((a) => [m.name, a.name, a.source, a.loaded_on.join(',') || '-']));
  return rows.length ? table(['MODEL', 'ADAPTER', 'SOURCE', 'LOADED ON'], rows) : '';
}

/** The replicas; `wide` (`-o wide`) adds the LoRA adapters each holds loaded, least recently used first. */
export function replicasTable(replicas: ReplicaView[], c: ChalkInstance, wide = false): string {
  if (replicas.length === 0) return 'No replicas.';
  return table(
    ['ID', 'MODEL', 'PROFILE', 'STATE', 'NODES', 'ENDPOINT', 'REVISION', 'AGE', ...(wide ? ['ADAPTERS'] : []), 'ERROR'],
    replicas.map((r) => [
      r.id,
      r.model,
      r.profile,
      r.state === 'ready' ? c.green(r.state) : r.state === 'failed' ? c.red(r.state) : r.state,
      r.shards.map((s) => (s.gpus.length ? `${s.node}[${s.gpus.join(',')}]` : s.node)).join(' '),
      r.endpoint ?? '-',
      r.revision ?? '-',
      age(r.age_seconds),
      ...(wide ? [r.adapters?.join(',') || '-'] : []),
      oneLine(r.error ?? coming(r) ?? r.note ?? '-', 100),
    ]),
  );
}

/** The progress of a starting replica's model file, per shard whose file is coming; undefined when none is. */
function coming(r: ReplicaView): string | undefined {
  const shards = r.shards.filter((s) => s.download);
  if (shards.length === 0) return undefined;
  if (r.shards.length === 1 && shards[0]?.download) return downloadText(shards[0].download);
  return shards.map((s) => `${s.node}: ${downloadText(s.download!)}`).join('; ');
}

/** The replica's full errors, which the table cuts short. */
export function replicaErrors(replicas: ReplicaView[]): string {
  return replicas
    .filter((r) => r.error)
    .map((r) => `${r.id}: ${r.error}`)
    .join('\n');
}

function oneLine(s: string, max: number): string {
  const flat = s.replace(/\s*\n\s*/g, ' | ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function age(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

/**
 * The summary line, then rejections grouped by profile and pool, one line per node; for
 * a LoRA adapter, first whether it can be served and why not, then its base's placement.
 */
export function explainText(v: ExplainView, c: ChalkInstance): string {
  if (!v.adapter) return placementText(v, c);
  const { name, problems } = v.adapter;
  const head = problems.length
    ? [c.red(`adapter ${name} of ${v.model} cannot be served:`), ...problems.map((p) => `  ${p}`)]
    : [c.green(`adapter ${name} of ${v.model} can be served (by a ready replica of ${v.model})`)];
  return [...head, '', `${v.model}:`, placementText(v, c)].join('\n');
}

function placementText(v: ExplainView, c: ChalkInstance): string {
  // Placed is not started: a replica whose file is still coming says so, last.
  const coming = (v.downloads ?? []).map((d) => `replica ${d.replica} on ${d.node}: ${downloadText(d.progress)}`);
  const withComing = (text: string) => [text, ...coming].join('\n');
  if (!v.attempted) {
    return withComing(
      v.placed
        ? `${v.model} is placed; no placement attempt has been needed since the server started.`
        : `${v.model}: placement has not been attempted yet (the reconciler runs every few seconds).`,
    );
  }
  const out: string[] = [];
  out.push(v.placed && v.rejections.length === 0 ? c.green(v.summary ?? `${v.model} is placed`) : (v.summary ?? ''));
  // "The lines below" only when some follow: a model placed at the first try has none.
  const below = v.rejections.length > 0 || v.notes.length > 0;
  if (v.placed)
    out.push(`${v.model} has replicas (see ctl replicas --model ${v.model})${below ? '; the lines below are from the last placement attempt' : ''}.`);
  const groups = new Map<string, RejectionView[]>();
  for (const r of v.rejections) {
    const key = `${r.profile}\u0000${r.pool ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const notesByProfile = new Map<string, string[]>();
  for (const n of v.notes) notesByProfile.set(n.profile, [...(notesByProfile.get(n.profile) ?? []), `${n.node}: ${n.note}`]);
  const profiles = [...new Set([...v.rejections.map((r) => r.profile), ...v.notes.map((n) => n.profile)])];
  for (const profile of profiles) {
    const pools = [...groups.keys()].filter((k) => k.startsWith(`${profile}\u0000`));
    out.push('');
    out.push(c.bold(`profile ${profile}:`));
    for (const key of pools) {
      const pool = key.split('\u0000')[1];
      const rs = groups.get(key)!;
      const indent = pool ? '    ' : '  ';
      if (pool) out.push(`  pool ${pool}:`);
      const byNode = new Map<string, string[]>();
      for (const r of rs) {
        const node = r.node ?? '';
        byNode.set(node, [...(byNode.get(node) ?? []), r.reason]);
      }
      for (const [node, reasons] of byNode) out.push(`${indent}${node ? `${node}: ` : ''}${reasons.join('; ')}`);
    }
    for (const note of notesByProfile.get(profile) ?? []) out.push(`  ${note}`);
  }
  return withComing(out.join('\n'));
}

export function keysTable(keys: KeyView[], now: Date): string {
  if (keys.length === 0) return 'No keys. Create one with: ctl keys create --name NAME';
  return table(
    ['ID', 'NAME', 'PREFIX', 'MODELS', 'RPM', 'TPM', 'CONCURRENT', 'PRIORITY', 'EXPIRES', 'STATUS'],
    keys.map((k) => [
      k.id,
      k.name,
      `${k.prefix}…`,
      k.models.join(',') || 'all',
      k.rpm ?? '-',
      k.tpm ?? '-',
      k.max_concurrent ?? '-',
      k.priority ?? 'standard',
      k.expires_at ?? 'never',
      k.revoked_at ? 'revoked' : k.expires_at && Date.parse(k.expires_at) <= now.getTime() ? 'expired' : 'active',
    ]),
  );
}

/** Usage per key and model; with `since` (as given to `ctl usage --since`), of that window. */
export function usageTable(rows: UsageRow[], since?: string): string {
  if (rows.length === 0)
    return since === undefined ? 'No requests yet.' : /^\d+[smhd]$/.test(since) ? `No requests in the last ${since}.` : `No requests since ${since}.`;
  return table(
    ['KEY', 'MODEL', 'REQUESTS', 'ERRORS', 'CANCELLED', 'PROMPT TOKENS', 'COMPLETION TOKENS'],
    rows.map((r) => [`${r.key_name} (${r.key_id})`, r.model, r.requests, r.errors, r.cancelled, r.prompt_tokens, r.completion_tokens]),
  );
}

/** `30d`, `12h`, `90m`, `45s` from now, or an ISO 8601 time, as ISO 8601. */
export function parseExpiry(text: string, now: Date): string {
  const m = /^(\d+)([smhd])$/.exec(text.trim());
  if (m) {
    const unit = { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
    return new Date(now.getTime() + Number(m[1]) * unit * 1000).toISOString();
  }
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new CtlError(`invalid --expires "${text}": want a duration like 30d, 12h, 90m or an ISO time like 2027-01-31T00:00:00Z`, 'usage');
  return new Date(t).toISOString();
}

/** Sizes as `du -h` would say them, in binary units: model files run to tens of GiB. */
export function sizeText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/** `ctl files`: per node, least recently used first (the order they are evicted in). */
export function filesTable(files: NodeFileView[], now: Date): string {
  if (files.length === 0) return 'No model files cached. Agents fetch http(s):// and llmgw:// sources into their --model-cache when a replica needs one.';
  return table(
    ['NODE', 'SHA256', 'SIZE', 'LAST USED', 'IN USE', 'SOURCE'],
    files.map((f) => [f.node, f.sha256.slice(0, 12), sizeText(f.size_bytes), ago(f.last_used, now), f.in_use ? 'yes' : 'no', f.source]),
  );
}

function ago(time: string, now: Date): string {
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(time)) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.floor(s / 60)}m ago`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** `ctl tokens list`. */
export function tokensTable(list: TokenView[]): string {
  if (list.length === 0) return 'No tokens. Create one with: ctl tokens create --name NAME --role viewer';
  return table(
    ['ID', 'NAME', 'ROLE', 'PREFIX', 'CREATED', 'STATUS'],
    list.map((t) => [t.id, t.name, t.role, `${t.prefix}…`, t.created_at, t.revoked_at ? 'revoked' : 'active']),
  );
}

/** `ctl rollout history`: the revisions, oldest first, the current one marked. */
export function historyTable(v: RolloutView): string {
  if (!v.history.length) return `No revisions of ${v.model} recorded yet.`;
  return table(
    ['REVISION', 'SINCE', 'CURRENT', 'CHANGE'],
    v.history.map((h) => [h.revision, h.since, h.current ? '*' : '', h.change]),
  );
}
