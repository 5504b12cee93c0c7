import {
  PRIORITIES,
  downloadText,
  type CatalogStatusView,
  type Priority,
  type ExplainView,
  type ModelAdapterView,
  type ModelView,
  type RejectionView,
  type ReplicaView,
  type RolloutView,
} from '@llmgw/shared';
import { html, seg, type Html } from './html.js';
import { table, updated, badge, chips, type Page } from './layout.js';

/** The models table, under the catalog's failed reload while there is one. */
export function modelsPage(models: ModelView[], now: Date, catalog?: CatalogStatusView): Page {
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
${
  short.length
    ? html`<h2>Not fully placed</h2><ul class="problems">${short.map(
        (m) => html`<li><a href="/models/${seg(m.name)}">${m.name}</a>: ${m.placement_summary}</li>`,
      )}</ul>`
    : ''
}`;
  return { title: 'Models', section: 'models', refresh: true, main: html`<h1>Models</h1>${reloadError(catalog)}${body}${updated(now)}` };
}

/** Every problem of the catalog's failed reload, and that the models shown are the previous catalog's. */
export function reloadError(catalog: CatalogStatusView | undefined): Html | '' {
  const e = catalog?.reload_error;
  if (!e) return '';
  const since = catalog.loaded_at ? html`, loaded at <time datetime="${catalog.loaded_at}">${catalog.loaded_at.slice(11, 19)} UTC</time>` : '';
  return html`<div class="alert" role="alert"><p><b>Catalog reload failed</b> at <time datetime="${e.at}">${e.at.slice(11, 19)} UTC</time> (${age(e.age_s)} ago): the models below are still the previous catalog's${since}.</p>
<ul class="problems">${e.problems.map((p) => html`<li>${p.message}</li>`)}${e.more ? html`<li>… and ${e.more} more</li>` : ''}</ul>
<p>Fix <code>${catalog.file ?? 'the catalog'}</code> and save it: it is reloaded on change (or on SIGHUP), and this notice goes away.</p></div>`;
}

function modelStatus(m: ModelView): Html {
  if (m.ready_replicas >= m.min_replicas) return badge('ok', m.min_replicas === 0 && m.total_replicas === 0 ? 'scaled to zero' : 'ready');
  if (m.placement_summary) return badge('bad', 'not placed');
  return badge('warn', 'starting');
}

/** Inputs of one model's page. */
export interface ModelInput {
  model: ModelView;
  replicas: ReplicaView[];
  explain: ExplainView;
  /** Its rollout, shown while one is in progress, paused, waiting or halted. */
  rollout?: RolloutView;
  /** Its requests waiting in the gateway per band (every replica saturated); absent: not shown. */
  queued?: Record<Priority, number> | undefined;
  /** Per LoRA adapter, why it cannot be served now (`ctl explain ADAPTER`); empty when it can. */
  adapterProblems?: Record<string, string[]>;
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
${v.rollout ? rolloutSection(v.rollout) : ''}
${v.queued ? queuedSection(v.queued) : ''}
<h2>Replicas</h2>
${replicasTable(v.replicas)}
${m.adapters?.length ? adaptersSection(m.adapters, v.adapterProblems ?? {}) : ''}
<h2>Placement</h2>
${explanation(v.explain)}
${updated(v.now)}`,
  };
}

/** The model's LoRA adapters: where each is loaded, and why one cannot be served. */
function adaptersSection(adapters: ModelAdapterView[], problems: Record<string, string[]>): Html {
  return html`<h2>LoRA adapters</h2>
${table(
  'LoRA adapters, where they are loaded and whether they can be served',
  html`<tr><th scope="col">Adapter</th><th scope="col">Source</th><th scope="col">Loaded on</th><th scope="col">Served</th></tr>`,
  html`<tbody>${adapters.map((a) => {
    const why = problems[a.name] ?? [];
    return html`<tr><th scope="row"><code>${a.name}</code></th><td><code>${a.source}</code></td><td>${a.loaded_on.length ? a.loaded_on.join(', ') : html`<span class="muted">not loaded</span>`}</td>
<td>${why.length ? html`${badge('bad', 'cannot be served')}${why.map((x) => html`<span class="sub">${clip(x)}</span>`)}` : badge('ok', 'yes')}</td></tr>`;
  })}</tbody>`,
)}
<p class="muted">Loaded as the gateway routed them (least recently used evicted first); <code>ctl explain ADAPTER</code> says why one cannot be served.</p>`;
}

/**
 * Requests waiting in the gateway by band, highest first: only while every replica is
 * saturated are there any, and then the band says who goes next.
 */
function queuedSection(q: Record<Priority, number>): Html {
  const total = PRIORITIES.reduce((n, b) => n + q[b], 0);
  return html`<h2>Queued in the gateway</h2>
${table(
  'Requests waiting per priority band',
  html`<tr><th scope="col">Band</th><th scope="col" class="num">Waiting</th></tr>`,
  html`<tbody>${PRIORITIES.map((b) => html`<tr><th scope="row">${b}</th><td class="num">${q[b]}</td></tr>`)}</tbody>`,
)}
<p class="muted">${total ? 'Every replica is saturated: requests wait here, the highest band first, up to 30 s each.' : 'Nothing waits: some replica has room.'}</p>`;
}

/** A rollout that is not complete, as `ctl rollout status` words it, with the revision each replica runs in the table below. */
function rolloutSection(r: RolloutView): Html | '' {
  if (r.state === 'complete') return '';
  const kind = r.state === 'halted' ? 'bad' : r.state === 'progressing' ? 'plain' : 'warn';
  const last = r.history.find((h) => h.current);
  return html`<section class="${r.state === 'halted' ? 'alert' : 'rollout'}" aria-labelledby="rollout"><h2 id="rollout">Rollout ${badge(kind, r.state)}</h2>
<p>${r.updated} of ${r.replicas} replicas run revision <code>${r.revision}</code>, ${r.ready} ready; ${r.outdated} of an earlier revision${r.reason ? html`. <b>${r.reason}</b>` : ''}</p>
${last ? html`<p class="muted">Changed <time datetime="${last.since}">${last.since.slice(11, 19)} UTC</time>: ${last.change}</p>` : ''}
<p class="muted">max_surge ${r.max_surge}, max_unavailable ${r.max_unavailable}, progress_deadline_s ${r.progress_deadline_s}${r.pause_after !== undefined ? `, pause_after ${r.pause_after}` : ''}; <code>ctl rollout status ${r.model}</code>.</p>
</section>`;
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
<td rowspan="${span}">${state(r.state)}${r.revision ? html`<span class="sub">revision ${r.revision}</span>` : ''}${r.adapters?.length ? html`<span class="sub">adapters loaded: ${r.adapters.join(', ')}</span>` : ''}</td><td rowspan="${span}">${r.endpoint ? html`<code>${r.endpoint}</code>` : '-'}</td>`;
      const err = html`<td rowspan="${span}">${r.error ? html`<span class="sub">${clip(r.error)}</span>` : '-'}</td>`;
      if (r.shards.length === 0) return html`<tbody><tr>${head}<td>-</td><td>-</td><td>-</td><td>-</td>${err}</tr></tbody>`;
      return html`<tbody>${r.shards.map(
        (s, i) => html`<tr>${i === 0 ? head : ''}<td>rank ${s.rank}</td><td><a href="/#node-${seg(s.node)}">${s.node}</a></td>
<td>${s.gpus.length ? s.gpus.join(', ') : 'CPU'}</td><td>${state(s.state)}${s.restarts ? html`<span class="sub">${s.restarts} restarts</span>` : ''}${s.download ? html`<span class="sub">${downloadText(s.download)}</span>` : ''}${s.error ? html`<span class="sub">${clip(s.error)}</span>` : ''}</td>${i === 0 ? err : ''}</tr>`,
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
  // Placed is not started: a replica whose model file still comes says how far it got.
  const coming = v.downloads?.length
    ? html`<ul class="problems">${v.downloads.map((d) => html`<li><b>${d.replica}</b> on ${d.node}: ${downloadText(d.progress)}</li>`)}</ul>`
    : '';
  if (!v.attempted) {
    return html`${coming}<p>${v.placed ? `${v.model} is placed; no placement attempt has been needed since the server started.` : `Placement of ${v.model} has not been attempted yet (the reconciler runs every few seconds).`}</p>`;
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
      ([node, reasons]) =>
        html`<tr><th scope="row">${node || html`<span class="muted">(${pool ? 'pool' : 'profile'})</span>`}</th><td>${reasons.map((x, i) => html`${i ? html`<br>` : ''}${x}`)}</td></tr>`,
    )}</tbody>`,
  )}`;
})}
${notes.length ? html`<h4>Notes</h4><ul class="problems">${notes.map((n) => html`<li><b>${n.node}</b>: ${n.note}</li>`)}</ul>` : ''}
</section>`;
  });
  return html`<p><b>${v.summary ?? ''}</b></p>
${coming}
${v.placed ? html`<p class="muted">${v.model} has replicas; what follows is from the last placement attempt.</p>` : ''}
${v.attempted_at ? html`<p class="muted">Last attempt <time datetime="${v.attempted_at}">${v.attempted_at.slice(11, 19)} UTC</time>.</p>` : ''}
${sections}`;
}
