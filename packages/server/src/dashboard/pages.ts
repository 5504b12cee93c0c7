import type { ExplainView, KeyView, ModelView, NodeView, RejectionView, ReplicaView, UsageRow } from '@llmgw/shared';
import { html, raw, seg, type Html, type Part } from './html.js';
import { CSS, SCRIPT } from './style.js';

/**
 * Pure renderers from the admin API's views to HTML: no request, no controller, so each
 * page is tested on plain objects and the dashboard shows exactly what `/api/v1` serves.
 */

/** Which tab a page belongs to, for the nav's `aria-current`. */
export type Section = 'fleet' | 'models' | 'keys';

/** A page before it is wrapped: the router sends `main` alone for a refresh. */
export interface Page {
  title: string;
  section?: Section;
  /** Whether the page refreshes itself; off where the operator is typing. */
  refresh: boolean;
  main: Html;
}

/** What the chrome needs from the session: the logout form's CSRF token, when logged in. */
export interface Chrome {
  csrf?: string;
}

const NAV: [Section, string, string][] = [
  ['fleet', '/', 'Fleet'],
  ['models', '/models', 'Models'],
  ['keys', '/keys', 'Keys & usage'],
];

/** The whole document around a page. */
export function layout(page: Page, chrome: Chrome): Html {
  const nav = chrome.csrf
    ? html`<nav aria-label="Dashboard"><ul>${NAV.map(
        ([s, href, label]) => html`<li><a href="${href}"${s === page.section ? raw(' aria-current="page"') : ''}>${label}</a></li>`,
      )}</ul></nav>
<form method="post" action="/logout">${csrfField(chrome.csrf)}<button type="submit">Log out</button></form>`
    : '';
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${page.title} · llmgw</title><style>${raw(CSS)}</style></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="/">llmgw</a>${nav}</header>
<main id="main" tabindex="-1"${page.refresh ? raw(' data-refresh') : ''}>${page.main}</main>
${page.refresh ? html`<script>${raw(SCRIPT)}</script>` : ''}
</body></html>`;
}

function csrfField(token: string): Html {
  return html`<input type="hidden" name="csrf" value="${token}">`;
}

/** A table inside a wrapper that scrolls sideways on a phone; focusable so keyboards can scroll it too. */
function table(label: string, head: Html, body: Part, extraClass = ''): Html {
  return html`<div class="wrap${extraClass}" role="region" aria-label="${label}" tabindex="0"><table>
<thead>${head}</thead>${body}</table></div>`;
}

function updated(now: Date): Html {
  const t = now.toISOString();
  return html`<p class="updated">Updated <time datetime="${t}">${t.slice(11, 19)} UTC</time>; this page refreshes every 5 seconds.</p>`;
}

function badge(kind: 'ok' | 'warn' | 'bad' | 'plain', text: string): Html {
  return html`<span class="badge ${kind}">${text}</span>`;
}

// ---------------------------------------------------------------------------------------
// Login

/** The token prompt: a password field, never a URL parameter. */
export function loginPage(o: { next: string; error?: string }): Page {
  return {
    title: 'Log in',
    refresh: false,
    main: html`<div class="login"><form class="card" method="post" action="/login">
<h1>Log in to llmgw</h1>
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus spellcheck="false">
<p class="hint">The token <code>ctl</code> uses: <code>LLMGW_ADMIN_TOKEN</code> as the server was started, or else the file
<code>admin-token</code> in the server's data directory (by default <code>~/.llmgw/server/admin-token</code>).</p>
<input type="hidden" name="next" value="${o.next}">
<div class="row"><button class="btn primary" type="submit">Log in</button></div>
</form></div>`,
  };
}

// ---------------------------------------------------------------------------------------
// Fleet

/** Inputs of the fleet page, all from the admin API's view functions. */
export interface FleetInput {
  nodes: NodeView[];
  replicas: ReplicaView[];
  models: ModelView[];
  csrf: string;
  now: Date;
  /** Set after an action: which one, on which node. */
  notice?: { action: string; node: string };
}

const DONE: Record<string, string> = { cordon: 'cordoned', uncordon: 'uncordoned', drain: 'is draining' };

export function fleetPage(v: FleetInput): Page {
  const readyNodes = v.nodes.filter((n) => n.liveness === 'ready').length;
  const gpuTotal = v.nodes.reduce((s, n) => s + n.gpu_total, 0);
  const gpuFree = v.nodes.reduce((s, n) => s + n.gpu_free, 0);
  const short = v.models.filter((m) => m.ready_replicas < m.min_replicas).length;
  const readyReplicas = v.replicas.filter((r) => r.state === 'ready').length;
  const modelsOn = new Map<string, Set<string>>();
  for (const r of v.replicas) for (const s of r.shards) modelsOn.set(s.node, (modelsOn.get(s.node) ?? new Set()).add(r.model));
  const notice = v.notice && DONE[v.notice.action] && v.nodes.some((n) => n.id === v.notice!.node)
    ? html`<p class="notice" role="status">Node <b>${v.notice.node}</b> ${DONE[v.notice.action]!}.</p>`
    : '';

  const body =
    v.nodes.length === 0
      ? html`<p>No nodes have joined yet. Start <code>llmgw-agent</code> on a machine with the join token (see the README: joining a machine).</p>`
      : html`${table(
          'Nodes',
          html`<tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">GPUs</th><th scope="col" class="num">Memory (GB)<span class="sub">reserved / total</span></th><th scope="col">Labels</th><th scope="col">Replicas</th><th scope="col">Last seen</th><th scope="col">Actions</th></tr>`,
          html`<tbody>${v.nodes.map((n) => nodeRow(n, [...(modelsOn.get(n.id) ?? [])], v.csrf))}</tbody>`,
        )}
${gpuTotal > 0 ? html`<p class="legend" aria-hidden="true"><span class="used">GPU in use</span><span class="free">GPU free</span><span class="sick">GPU unhealthy</span></p>` : ''}
${problems(v.nodes)}`;

  return {
    title: 'Fleet',
    section: 'fleet',
    refresh: true,
    main: html`${notice}<h1>Fleet</h1>
<ul class="tiles">
<li><b>${readyNodes} / ${v.nodes.length}</b>nodes reporting</li>
<li><b>${gpuFree} / ${gpuTotal}</b>GPUs free</li>
<li><b>${readyReplicas} / ${v.replicas.length}</b>replicas ready</li>
<li><b>${short}</b>${short > 0 ? html`<a href="/models">models short of replicas</a>` : 'models short of replicas'}</li>
</ul>
${body}
${updated(v.now)}`,
  };
}

function nodeRow(n: NodeView, models: string[], csrf: string): Html {
  const sub = [n.hostname && n.hostname !== n.id ? n.hostname : undefined, n.mgmt_addr, n.pool ? `pool ${n.pool}` : undefined, n.agent_version ? `agent ${n.agent_version}` : undefined]
    .filter(Boolean)
    .join(' · ');
  return html`<tr id="node-${n.id}">
<th scope="row">${n.id}${sub ? html`<span class="sub">${sub}</span>` : ''}</th>
<td>${nodeState(n)}</td>
<td>${gpuCell(n)}</td>
<td class="num nowrap">${memCell(n)}</td>
<td>${Object.keys(n.labels).length ? Object.entries(n.labels).map(([k, val]) => html`<span class="chip">${k}=${val}</span>`) : html`<span class="muted">none</span>`}</td>
<td>${n.replicas}${models.length ? html`<span class="sub">${models.map((m, i) => html`${i ? ', ' : ''}<a href="/models/${seg(m)}">${m}</a>`)}</span>` : ''}</td>
<td class="nowrap">${n.last_seen_ago}</td>
<td>${actions(n, csrf)}</td>
</tr>`;
}

function nodeState(n: NodeView): Html {
  // Liveness and admin state are separate facts (a cordoned node may also be silent);
  // both show, each in words, so colour is never the only signal.
  const live = n.liveness === 'ready' ? badge('ok', 'reporting') : badge('bad', n.liveness);
  const admin = n.state === 'ready' ? badge('plain', 'schedulable') : badge('warn', n.state);
  return html`${live} ${admin}${n.state !== 'ready' && n.state_reason ? html`<span class="sub">${n.state_reason}</span>` : ''}`;
}

function gpuCell(n: NodeView): Html {
  const facts = [n.gpu_classes.join(', '), n.fabrics.join(', ')].filter(Boolean).join(' · ');
  if (n.gpu_total === 0) {
    return html`${n.gpu_error ? html`<span class="badge bad">GPU error</span>` : html`<span class="muted">no GPUs</span>`}${facts ? html`<span class="sub">${facts}</span>` : ''}`;
  }
  const sick = n.unhealthy_gpus.length;
  const used = Math.max(0, n.gpu_total - n.gpu_free - sick);
  const cells = [...Array(used).fill('used'), ...Array(n.gpu_free).fill('free'), ...Array(Math.max(0, n.gpu_total - used - n.gpu_free)).fill('sick')] as string[];
  const words = `${n.gpu_free} free of ${n.gpu_total}${used ? `, ${used} in use` : ''}${sick ? `, ${sick} unhealthy` : ''}`;
  // The bar is decoration; the words next to it say the same for screen readers.
  return html`<div class="gpubar" aria-hidden="true" title="${words}">${cells.map((c) => html`<span class="${c}"></span>`)}</div>
<span class="nowrap">${words}</span>${facts ? html`<span class="sub">${facts}</span>` : ''}`;
}

function memCell(n: NodeView): Html {
  const reserved = n.memory_reserved_gb ?? 0;
  // `-`, not 0: an agent that did not report memory is not a small machine.
  if (n.memory_gb === undefined) return html`-${reserved ? html`<span class="sub">${reserved} reserved</span>` : ''}`;
  return html`${reserved} / ${n.memory_gb}<meter aria-hidden="true" min="0" max="${n.memory_gb}" value="${Math.min(reserved, n.memory_gb)}"></meter>`;
}

function actions(n: NodeView, csrf: string): Html {
  const post = (action: string, label: string) =>
    html`<form method="post" action="/nodes/${seg(n.id)}/state">${csrfField(csrf)}<input type="hidden" name="action" value="${action}"><button class="btn" type="submit" aria-label="${label} ${n.id}">${label}</button></form>`;
  const drain = html`<a class="btn" href="/nodes/${seg(n.id)}/drain" aria-label="Drain ${n.id}…">Drain…</a>`;
  if (n.state === 'ready') return html`<div class="actions">${post('cordon', 'Cordon')}${drain}</div>`;
  if (n.state === 'cordoned') return html`<div class="actions">${post('uncordon', 'Uncordon')}${drain}</div>`;
  return html`<div class="actions">${post('uncordon', 'Uncordon')}</div>`;
}

function problems(nodes: NodeView[]): Html | '' {
  const items: Html[] = [];
  for (const n of nodes) {
    for (const u of n.unhealthy_gpus) items.push(html`<li><b>${n.id}</b>: ${u}</li>`);
    if (n.gpu_error) items.push(html`<li><b>${n.id}</b>: ${n.gpu_error}</li>`);
    if (n.drain_status) items.push(html`<li><b>${n.id}</b>: ${n.drain_status}${n.drain_deadline ? ` (deadline ${n.drain_deadline})` : ''}</li>`);
    if (n.replacement_paused) items.push(html`<li><b>${n.id}</b>: ${n.replacement_paused}</li>`);
  }
  return items.length ? html`<h2>Needs attention</h2><ul class="problems">${items}</ul>` : '';
}

/** The drain confirmation: a reason, then an explicit second click. */
export function drainPage(o: { node: NodeView; csrf: string; error?: string; reason?: string }): Page {
  const n = o.node;
  return {
    title: `Drain ${n.id}`,
    section: 'fleet',
    refresh: false,
    main: html`<form class="card" method="post" action="/nodes/${seg(n.id)}/state">
<h1>Drain ${n.id}?</h1>
<p>No new replicas will be placed on <b>${n.id}</b>. ${n.replicas === 0
      ? 'It runs no replicas, so nothing has to move.'
      : `Its ${n.replicas === 1 ? 'replica' : `${n.replicas} replicas`} will be replaced on other nodes first, then stopped once in-flight requests finish.`} Uncordon to undo.</p>
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
${csrfField(o.csrf)}<input type="hidden" name="action" value="drain"><input type="hidden" name="confirm" value="yes">
<label for="reason">Reason</label>
<textarea id="reason" name="reason" rows="2" maxlength="1024" required aria-describedby="reason-hint">${o.reason ?? ''}</textarea>
<p class="hint" id="reason-hint">Shown next to the node in the fleet and in <code>ctl nodes</code>, e.g. "PSU swap, ticket 1234".</p>
<div class="row"><button class="btn danger" type="submit">Drain ${n.id}</button><a class="btn" href="/">Cancel</a></div>
</form>`,
  };
}

// ---------------------------------------------------------------------------------------
// Models

export function modelsPage(models: ModelView[], now: Date): Page {
  const short = models.filter((m) => m.placement_summary);
  const body =
    models.length === 0
      ? html`<p>The catalog has no models. Start the server with <code>--catalog FILE</code>.</p>`
      : html`${table(
          'Models',
          html`<tr><th scope="col">Model</th><th scope="col">Status</th><th scope="col" class="num">Ready / target</th><th scope="col" class="num">Replicas</th><th scope="col" class="num">Scaling</th><th scope="col">Profiles</th><th scope="col">Aliases</th><th scope="col">Fallbacks</th></tr>`,
          html`<tbody>${models.map(
            (m) => html`<tr><th scope="row"><a href="/models/${seg(m.name)}">${m.name}</a></th>
<td>${modelStatus(m)}</td>
<td class="num">${m.ready_replicas} / ${m.min_replicas}</td>
<td class="num">${m.total_replicas}</td>
<td class="num nowrap">${m.min_replicas}–${m.max_replicas}</td>
<td>${chips(m.profiles)}</td><td>${chips(m.aliases)}</td><td>${chips(m.fallbacks)}</td></tr>`,
          )}</tbody>`,
        )}
${short.length ? html`<h2>Not fully placed</h2><ul class="problems">${short.map(
          (m) => html`<li><a href="/models/${seg(m.name)}">${m.name}</a>: ${m.placement_summary}</li>`,
        )}</ul>` : ''}`;
  return { title: 'Models', section: 'models', refresh: true, main: html`<h1>Models</h1>${body}${updated(now)}` };
}

function modelStatus(m: ModelView): Html {
  if (m.ready_replicas >= m.min_replicas) return badge('ok', m.min_replicas === 0 && m.total_replicas === 0 ? 'scaled to zero' : 'ready');
  if (m.placement_summary) return badge('bad', 'not placed');
  return badge('warn', 'starting');
}

function chips(xs: string[]): Html {
  return xs.length ? html`${xs.map((x) => html`<span class="chip">${x}</span>`)}` : html`<span class="muted">-</span>`;
}

/** Inputs of one model's page. */
export interface ModelInput {
  model: ModelView;
  replicas: ReplicaView[];
  explain: ExplainView;
  now: Date;
}

export function modelPage(v: ModelInput): Page {
  const m = v.model;
  return {
    title: m.name,
    section: 'models',
    refresh: true,
    main: html`<p><a href="/models">← Models</a></p><h1>${m.name} ${modelStatus(m)}</h1>
<ul class="tiles">
<li><b>${m.ready_replicas} / ${m.min_replicas}</b>ready / target</li>
<li><b>${m.min_replicas}–${m.max_replicas}</b>scaling</li>
<li><b>${m.profiles.length}</b>${m.profiles.length === 1 ? 'profile' : 'profiles'}: ${m.profiles.join(', ')}</li>
</ul>
<p>Source <code>${m.source}</code>${m.aliases.length ? html`; also called ${m.aliases.map((a, i) => html`${i ? ', ' : ''}<code>${a}</code>`)}` : ''}${m.fallbacks.length ? html`; falls back to ${m.fallbacks.map((f, i) => html`${i ? ', ' : ''}<a href="/models/${seg(f)}">${f}</a>`)}` : ''}.</p>
<h2>Replicas</h2>
${replicasTable(v.replicas)}
<h2>Placement</h2>
${explanation(v.explain)}
${updated(v.now)}`,
  };
}

const clip = (s: string, max = 2000) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

function replicasTable(rs: ReplicaView[]): Html {
  if (rs.length === 0) return html`<p class="muted">No replicas.</p>`;
  const state = (s: string) => badge(s === 'ready' ? 'ok' : s === 'failed' ? 'bad' : s === 'stopped' ? 'plain' : 'warn', s);
  // One tbody per replica: its shards are rows, the replica's own cells span them.
  return table(
    'Replicas and shards',
    html`<tr><th scope="col">Replica</th><th scope="col">State</th><th scope="col">Endpoint</th><th scope="col">Shard</th><th scope="col">Node</th><th scope="col">GPUs</th><th scope="col">Shard state</th><th scope="col">Error</th></tr>`,
    rs.map((r) => {
      const span = Math.max(1, r.shards.length);
      const head = html`<th scope="rowgroup" rowspan="${span}">${r.id}<span class="sub">profile ${r.profile}${r.pool ? ` · pool ${r.pool}` : ''} · ${age(r.age_seconds)} old</span></th>
<td rowspan="${span}">${state(r.state)}</td><td rowspan="${span}">${r.endpoint ? html`<code>${r.endpoint}</code>` : '-'}</td>`;
      const err = html`<td rowspan="${span}">${r.error ? html`<span class="sub">${clip(r.error)}</span>` : '-'}</td>`;
      if (r.shards.length === 0) return html`<tbody><tr>${head}<td>-</td><td>-</td><td>-</td><td>-</td>${err}</tr></tbody>`;
      return html`<tbody>${r.shards.map(
        (s, i) => html`<tr>${i === 0 ? head : ''}<td>rank ${s.rank}</td><td><a href="/#node-${seg(s.node)}">${s.node}</a></td>
<td>${s.gpus.length ? s.gpus.join(', ') : 'CPU'}</td><td>${state(s.state)}${s.restarts ? html`<span class="sub">${s.restarts} restarts</span>` : ''}${s.error ? html`<span class="sub">${clip(s.error)}</span>` : ''}</td>${i === 0 ? err : ''}</tr>`,
      )}</tbody>`;
    }),
  );
}

function age(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

/** The explanation as `ctl explain` prints it: summary, then rejections by profile and pool, one entry per node. */
export function explanation(v: ExplainView): Html {
  if (!v.attempted) {
    return html`<p>${v.placed ? `${v.model} is placed; no placement attempt has been needed since the server started.` : `Placement of ${v.model} has not been attempted yet (the reconciler runs every few seconds).`}</p>`;
  }
  const groups = new Map<string, RejectionView[]>();
  for (const r of v.rejections) {
    const key = `${r.profile}\u0000${r.pool ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const profiles = [...new Set([...v.rejections.map((r) => r.profile), ...v.notes.map((n) => n.profile)])];
  const sections = profiles.map((profile) => {
    const pools = [...groups.keys()].filter((k) => k.startsWith(`${profile}\u0000`));
    const notes = v.notes.filter((n) => n.profile === profile);
    return html`<section class="profile" aria-labelledby="p-${profile}"><h3 id="p-${profile}">profile ${profile}</h3>
${pools.map((key) => {
  const pool = key.split('\u0000')[1];
  const byNode = new Map<string, string[]>();
  for (const r of groups.get(key)!) byNode.set(r.node ?? '', [...(byNode.get(r.node ?? '') ?? []), r.reason]);
  return html`${pool ? html`<h4>pool ${pool}</h4>` : ''}${table(
    `Rejections, profile ${profile}${pool ? `, pool ${pool}` : ''}`,
    html`<tr><th scope="col">Node</th><th scope="col">Why not</th></tr>`,
    html`<tbody>${[...byNode].map(
      ([node, reasons]) => html`<tr><th scope="row">${node || html`<span class="muted">(${pool ? 'pool' : 'profile'})</span>`}</th><td>${reasons.map((x, i) => html`${i ? html`<br>` : ''}${x}`)}</td></tr>`,
    )}</tbody>`,
  )}`;
})}
${notes.length ? html`<h4>Notes</h4><ul class="problems">${notes.map((n) => html`<li><b>${n.node}</b>: ${n.note}</li>`)}</ul>` : ''}
</section>`;
  });
  return html`<p><b>${v.summary ?? ''}</b></p>
${v.placed ? html`<p class="muted">${v.model} has replicas; what follows is from the last placement attempt.</p>` : ''}
${v.attempted_at ? html`<p class="muted">Last attempt <time datetime="${v.attempted_at}">${v.attempted_at.slice(11, 19)} UTC</time>.</p>` : ''}
${sections}`;
}

// ---------------------------------------------------------------------------------------
// Keys and usage

export function keysPage(keys: KeyView[], usage: UsageRow[], now: Date): Page {
  const status = (k: KeyView) =>
    k.revoked_at ? badge('plain', 'revoked') : k.expires_at && Date.parse(k.expires_at) <= now.getTime() ? badge('warn', 'expired') : badge('ok', 'active');
  const keyTable = keys.length
    ? table(
        'Keys',
        html`<tr><th scope="col">Name</th><th scope="col">ID</th><th scope="col">Prefix</th><th scope="col">Status</th><th scope="col">Models</th><th scope="col" class="num">RPM</th><th scope="col" class="num">Concurrent</th><th scope="col">Expires</th><th scope="col">Created</th></tr>`,
        html`<tbody>${keys.map(
          (k) => html`<tr><th scope="row">${k.name}</th><td><code>${k.id}</code></td><td><code>${k.prefix}…</code></td><td>${status(k)}</td>
<td>${k.models.length ? chips(k.models) : 'all'}</td><td class="num">${k.rpm ?? '-'}</td><td class="num">${k.max_concurrent ?? '-'}</td>
<td class="nowrap">${k.expires_at ?? 'never'}</td><td class="nowrap">${k.created_at}</td></tr>`,
        )}</tbody>`,
      )
    : html`<p>No keys. Create one with <code>ctl keys create --name NAME</code>.</p>`;
  const usageTable = usage.length
    ? table(
        'Usage',
        html`<tr><th scope="col">Key</th><th scope="col">Model</th><th scope="col" class="num">Requests</th><th scope="col" class="num">Errors</th><th scope="col" class="num">Prompt tokens</th><th scope="col" class="num">Completion tokens</th></tr>`,
        html`<tbody>${usage.map(
          (u) => html`<tr><th scope="row">${u.key_name} <span class="muted">(${u.key_id})</span></th><td>${u.model}</td>
<td class="num">${u.requests}</td><td class="num">${u.errors}</td><td class="num">${u.prompt_tokens}</td><td class="num">${u.completion_tokens}</td></tr>`,
        )}</tbody>`,
      )
    : html`<p>No requests yet.</p>`;
  return {
    title: 'Keys & usage',
    section: 'keys',
    refresh: true,
    main: html`<h1>Client API keys</h1>${keyTable}
<p class="muted">Secrets are shown once, at creation, and never stored. Create and revoke keys with <code>ctl keys</code>.</p>
<h2>Usage</h2>${usageTable}${updated(now)}`,
  };
}

// ---------------------------------------------------------------------------------------
// Errors

/** A page for a refused or missing thing, with the way back. */
export function messagePage(title: string, message: string, back: { href: string; label: string } = { href: '/', label: 'Back to the fleet' }): Page {
  return {
    title,
    refresh: false,
    main: html`<div class="card"><h1>${title}</h1><p>${message}</p><p><a href="${back.href}">${back.label}</a></p></div>`,
  };
}
