import { html, raw, type Html, type Part } from './html.js';
import { CSS, SCRIPT } from './style.js';

/**
 * The chrome around every page and the pieces pages share. Pages are pure renderers from
 * the admin API's views to HTML (one file per page: login-page, fleet-page, models-page,
 * keys-page): no request, no controller, so each page is tested on plain objects and the
 * dashboard shows exactly what `/api/v1` serves.
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
  /** The admin listener serves plain HTTP (`--insecure-http`): every page says so. */
  insecureHttp?: boolean;
}

/** The warning under the header of a server started with `--insecure-http`. */
export const INSECURE_BANNER =
  'This server runs with --insecure-http: the admin token, the join token and engine keys cross the network in clear text unless a proxy in front terminates TLS.';

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
${chrome.insecureHttp ? html`<p class="banner" role="alert">${INSECURE_BANNER}</p>` : ''}
<main id="main" tabindex="-1"${page.refresh ? raw(' data-refresh') : ''}>${page.main}</main>
${page.refresh ? html`<script>${raw(SCRIPT)}</script>` : ''}
</body></html>`;
}

/** The hidden field every state-changing form carries. */
export function csrfField(token: string): Html {
  return html`<input type="hidden" name="csrf" value="${token}">`;
}

/** A table inside a wrapper that scrolls sideways on a phone; focusable so keyboards can scroll it too. */
export function table(label: string, head: Html, body: Part, extraClass = ''): Html {
  return html`<div class="wrap${extraClass}" role="region" aria-label="${label}" tabindex="0"><table>
<thead>${head}</thead>${body}</table></div>`;
}

/** When the page was drawn, and that it refreshes itself. */
export function updated(now: Date): Html {
  const t = now.toISOString();
  return html`<p class="updated">Updated <time datetime="${t}">${t.slice(11, 19)} UTC</time>; this page refreshes every 5 seconds.</p>`;
}

/** A short status word, coloured by how good it is. */
export function badge(kind: 'ok' | 'warn' | 'bad' | 'plain', text: string): Html {
  return html`<span class="badge ${kind}">${text}</span>`;
}

/** A list of names as chips, or a dash when there are none. */
export function chips(xs: string[]): Html {
  return xs.length ? html`${xs.map((x) => html`<span class="chip">${x}</span>`)}` : html`<span class="muted">-</span>`;
}

/** A page for a refused or missing thing, with the way back. */
export function messagePage(title: string, message: string, back: { href: string; label: string } = { href: '/', label: 'Back to the fleet' }): Page {
  return {
    title,
    refresh: false,
    main: html`<div class="card"><h1>${title}</h1><p>${message}</p><p><a href="${back.href}">${back.label}</a></p></div>`,
  };
}
