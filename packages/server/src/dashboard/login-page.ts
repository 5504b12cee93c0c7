import { html } from './html.js';
import { type Page } from './layout.js';

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
