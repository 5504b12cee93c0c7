import type { KeyView, UsageRow } from '@llmgw/shared';
import { html } from './html.js';
import { table, updated, badge, chips, type Page } from './layout.js';

export function keysPage(keys: KeyView[], usage: UsageRow[], now: Date): Page {
  const status = (k: KeyView) =>
    k.revoked_at ? badge('plain', 'revoked') : k.expires_at && Date.parse(k.expires_at) <= now.getTime() ? badge('warn', 'expired') : badge('ok', 'active');
  const keyTable = keys.length
    ? table(
        'Keys',
        html`<tr><th scope="col">Name</th><th scope="col">ID</th><th scope="col">Prefix</th><th scope="col">Status</th><th scope="col">Models</th><th scope="col" class="num">RPM</th><th scope="col" class="num">TPM</th><th scope="col" class="num">Concurrent</th><th scope="col">Priority</th><th scope="col">Expires</th><th scope="col">Created</th></tr>`,
        html`<tbody>${keys.map(
          (k) => html`<tr><th scope="row">${k.name}</th><td><code>${k.id}</code></td><td><code>${k.prefix}…</code></td><td>${status(k)}</td>
<td>${k.models.length ? chips(k.models) : 'all'}</td><td class="num">${k.rpm ?? '-'}</td><td class="num">${k.tpm ?? '-'}</td><td class="num">${k.max_concurrent ?? '-'}</td><td>${k.priority ?? 'standard'}</td>
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
