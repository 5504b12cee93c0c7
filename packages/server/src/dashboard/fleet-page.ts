import { lastSeenText, nodeStateWords, type ModelView, type NodeView, type ReplicaView } from '@llmgw/shared';
import { html, seg, type Html } from './html.js';
import { csrfField, table, updated, badge, type Page } from './layout.js';

/** Inputs of the fleet page, all from the admin API's view functions. */
export interface FleetInput {
  nodes: NodeView[];
  replicas: ReplicaView[];
  models: ModelView[];
  csrf: string;
  now: Date;
  /** A viewer's session: the actions are left out (the server refuses them anyway). */
  readOnly?: boolean;
  /** Set after an action: which one, on which node. */
  notice?: { action: string; node: string };
  /** The whole fleet's counts when `nodes` is one page of it (default: counted from `nodes`). */
  totals?: FleetTotals;
  /** Where `nodes` sits in the fleet: the cursor it starts after, and the next page's. */
  page?: { after?: string; next?: string };
}

/** The fleet's tiles, counted over every node, not only the page shown. */
export interface FleetTotals {
  nodes: number;
  readyNodes: number;
  gpuTotal: number;
  gpuFree: number;
}

const DONE: Record<string, string> = { cordon: 'cordoned', uncordon: 'uncordoned', drain: 'is draining' };

export function fleetPage(v: FleetInput): Page {
  const {
    nodes: nodeCount,
    readyNodes,
    gpuTotal,
    gpuFree,
  } = v.totals ?? {
    nodes: v.nodes.length,
    readyNodes: v.nodes.filter((n) => n.liveness === 'ready').length,
    gpuTotal: v.nodes.reduce((s, n) => s + n.gpu_total, 0),
    gpuFree: v.nodes.reduce((s, n) => s + n.gpu_free, 0),
  };
  const short = v.models.filter((m) => m.ready_replicas < m.min_replicas).length;
  const readyReplicas = v.replicas.filter((r) => r.state === 'ready').length;
  const modelsOn = new Map<string, Set<string>>();
  for (const r of v.replicas) for (const s of r.shards) modelsOn.set(s.node, (modelsOn.get(s.node) ?? new Set()).add(r.model));
  const asked = v.notice;
  const done = asked && DONE[asked.action];
  const notice = asked && done && v.nodes.some((n) => n.id === asked.node) ? html`<p class="notice" role="status">Node <b>${asked.node}</b> ${done}.</p>` : '';

  const body =
    v.nodes.length === 0
      ? html`<p>No nodes have joined yet. Start <code>llmgw-agent</code> on a machine with the join token (see the README: joining a machine).</p>`
      : html`${table(
          'Nodes',
          html`<tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">GPUs</th><th scope="col" class="num">Memory (GiB)<span class="sub">reserved / total</span></th><th scope="col">Labels</th><th scope="col">Replicas</th><th scope="col">Last seen</th><th scope="col">Actions</th></tr>`,
          html`<tbody>${v.nodes.map((n) => nodeRow(n, [...(modelsOn.get(n.id) ?? [])], v.readOnly ? undefined : v.csrf))}</tbody>`,
        )}
${pager(v.page)}
${gpuTotal > 0 ? html`<p class="legend" aria-hidden="true"><span class="used">GPU in use</span><span class="free">GPU free</span><span class="sick">GPU unhealthy</span></p>` : ''}
${problems(v.nodes)}`;

  return {
    title: 'Fleet',
    section: 'fleet',
    refresh: true,
    main: html`${notice}<h1>Fleet</h1>
<ul class="tiles">
<li><b>${readyNodes} / ${nodeCount}</b>nodes ready</li>
<li><b>${gpuFree} / ${gpuTotal}</b>GPUs free</li>
<li><b>${readyReplicas} / ${v.replicas.length}</b>replicas ready</li>
<li><b>${short}</b>${short > 0 ? html`<a href="/models">models short of replicas</a>` : 'models short of replicas'}</li>
</ul>
${body}
${updated(v.now)}`,
  };
}

/** Links to the first and the next page of nodes, when the fleet does not fit one. */
function pager(p: FleetInput['page']): Html | '' {
  if (!p?.after && !p?.next) return '';
  const first = p.after ? html`<a class="btn" href="/">First page</a>` : '';
  const next = p.next ? html`<a class="btn" href="/?after=${encodeURIComponent(p.next)}" rel="next">Next page</a>` : '';
  return html`<nav class="actions" aria-label="Pages of nodes">${first}${next}</nav>`;
}

function nodeRow(n: NodeView, models: string[], csrf: string | undefined): Html {
  const sub = [
    n.hostname && n.hostname !== n.id ? n.hostname : undefined,
    n.mgmt_addr,
    n.pool ? `pool ${n.pool}` : undefined,
    n.agent_version ? `agent ${n.agent_version}` : undefined,
  ]
    .filter(Boolean)
    .join(' · ');
  return html`<tr id="node-${n.id}">
<th scope="row">${n.id}${sub ? html`<span class="sub">${sub}</span>` : ''}</th>
<td>${nodeState(n)}</td>
<td>${gpuCell(n)}</td>
<td class="num nowrap">${memCell(n)}</td>
<td>${Object.keys(n.labels).length ? Object.entries(n.labels).map(([k, val]) => html`<span class="chip">${k}=${val}</span>`) : html`<span class="muted">none</span>`}</td>
<td>${n.replicas}${models.length ? html`<span class="sub">${models.map((m, i) => html`${i ? ', ' : ''}<a href="/models/${seg(m)}">${m}</a>`)}</span>` : ''}</td>
<td class="nowrap">${lastSeenText(n)}</td>
<td>${actions(n, csrf)}</td>
</tr>`;
}

function nodeState(n: NodeView): Html {
  // The words ctl shows (nodeStateWords): liveness when it is not ready, the admin state
  // when it is not the default, `ready` when both are; in words, so colour is never the only signal.
  const words = nodeStateWords(n).map((w) => badge(w === 'ready' ? 'ok' : w === n.liveness ? 'bad' : 'warn', w));
  return html`${words.map((w, i) => html`${i ? ' ' : ''}${w}`)}${n.state !== 'ready' && n.state_reason ? html`<span class="sub">${n.state_reason}</span>` : ''}`;
}

function gpuCell(n: NodeView): Html {
  const facts = [n.gpu_classes.join(', '), n.fabrics.join(', ')].filter(Boolean).join(' · ');
  if (n.gpu_total === 0) {
    return html`${n.gpu_error ? html`<span class="badge bad">GPU error</span>` : html`<span class="muted">no GPUs</span>`}${facts ? html`<span class="sub">${facts}</span>` : ''}`;
  }
  const sick = n.unhealthy_gpus.length;
  const used = Math.max(0, n.gpu_total - n.gpu_free - sick);
  const cells = [
    ...Array<string>(used).fill('used'),
    ...Array<string>(n.gpu_free).fill('free'),
    ...Array<string>(Math.max(0, n.gpu_total - used - n.gpu_free)).fill('sick'),
  ];
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

/** The node's buttons; none without a CSRF token (a read-only session). */
function actions(n: NodeView, csrf: string | undefined): Html {
  if (csrf === undefined) return html`<span class="sub">read-only</span>`;
  const post = (action: string, label: string) =>
    html`<form method="post" action="/nodes/${seg(n.id)}/state">${csrfField(csrf)}<input type="hidden" name="action" value="${action}"><button class="btn" type="submit" aria-label="${label} ${n.id}">${label}</button></form>`;
  const drain = html`<a class="btn" href="/nodes/${seg(n.id)}/drain" aria-label="Drain ${n.id}…">Drain…</a>`;
  // Only ctl approves: an approval is a decision about a machine, not a button to click by chance.
  if (n.state === 'pending-approval') return html`<span class="sub">waiting for approval: ctl nodes approve ${n.id}</span>`;
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
<p>No new replicas will be placed on <b>${n.id}</b>. ${
      n.replicas === 0
        ? 'It runs no replicas, so nothing has to move.'
        : `Its ${n.replicas === 1 ? 'replica' : `${n.replicas} replicas`} will be replaced on other nodes first, then stopped once in-flight requests finish.`
    } Uncordon to undo.</p>
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
${csrfField(o.csrf)}<input type="hidden" name="action" value="drain"><input type="hidden" name="confirm" value="yes">
<label for="reason">Reason</label>
<textarea id="reason" name="reason" rows="2" maxlength="1024" required aria-describedby="reason-hint">${o.reason ?? ''}</textarea>
<p class="hint" id="reason-hint">Shown next to the node in the fleet and in <code>ctl nodes</code>, e.g. "PSU swap, ticket 1234".</p>
<div class="row"><button class="btn danger" type="submit">Drain ${n.id}</button><a class="btn" href="/">Cancel</a></div>
</form>`,
  };
}
