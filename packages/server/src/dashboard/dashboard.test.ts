import { describe, expect, it } from '@jest/globals';
import type { Request } from 'express';
import type { ExplainView, NodeView } from '@llmgw/shared';
import { sameOrigin } from './dashboard.js';
import { html, raw } from './html.js';
import { fleetPage } from './fleet-page.js';
import { INSECURE_BANNER, layout } from './layout.js';
import { loginPage } from './login-page.js';
import { explanation } from './models-page.js';
import { LoginLimiter, SESSION_TTL_S, Sessions, cookieValue } from './session.js';
import { CSP, CSS, SCRIPT } from './style.js';

const node = (o: Partial<NodeView> = {}): NodeView => ({
  id: 'n1',
  state: 'ready',
  liveness: 'ready',
  labels: {},
  gpu_total: 0,
  gpu_free: 0,
  gpu_classes: [],
  fabrics: [],
  unhealthy_gpus: [],
  last_seen_s: 1,
  replicas: 0,
  ...o,
});

describe('html', () => {
  it('escapes every interpolation except Html, in text and attributes alike', () => {
    const evil = `"><script>alert('x')</script>&`;
    expect(html`<a title="${evil}">${evil}</a>`.value).toBe(
      '<a title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;</a>',
    );
    expect(html`<p>${[html`<b>${'<i>'}</b>`, 1, null, undefined, false]}</p>`.value).toBe('<p><b>&lt;i&gt;</b>1</p>');
    expect(html`${raw('<br>')}`.value).toBe('<br>');
  });
});

describe('pages', () => {
  it('shows `-` for memory an agent did not report, and reserved / total otherwise', () => {
    const page = fleetPage({
      nodes: [node({ id: 'old' }), node({ id: 'small', memory_gb: 8, memory_reserved_gb: 2 })],
      replicas: [],
      models: [],
      csrf: 'tok',
      now: new Date(0),
    }).main.value;
    expect(page).toMatch(/<tr id="node-old">[\s\S]*?<td class="num nowrap">-<\/td>/);
    expect(page).toMatch(/<tr id="node-small">[\s\S]*?<td class="num nowrap">2 \/ 8<meter/);
  });

  // Issue 27: the fleet is paged; the tiles count the whole fleet, not the page.
  it('shows one page of nodes with a link to the next, and the whole fleet in the tiles', () => {
    const main = fleetPage({
      nodes: [node({ id: 'a' }), node({ id: 'b' })],
      replicas: [],
      models: [],
      csrf: 't',
      now: new Date(0),
      totals: { nodes: 250, readyNodes: 240, gpuTotal: 2000, gpuFree: 100 },
      page: { after: 'a0', next: 'b' },
    }).main.value;
    expect(main).toContain('<li><b>240 / 250</b>nodes ready</li>');
    expect(main).toContain('<li><b>100 / 2000</b>GPUs free</li>');
    expect(main).toContain('<a class="btn" href="/?after=b" rel="next">Next page</a>');
    expect(main).toContain('<a class="btn" href="/">First page</a>');
    const one = fleetPage({ nodes: [node({ id: 'a' })], replicas: [], models: [], csrf: 't', now: new Date(0), page: {} }).main.value;
    expect(one).not.toContain('Next page');
  });

  it('never lets a label from an agent become markup', () => {
    const page = fleetPage({ nodes: [node({ labels: { team: '<img src=x onerror=alert(1)>' } })], replicas: [], models: [], csrf: 't', now: new Date(0) });
    expect(page.main.value).not.toContain('<img');
    expect(page.main.value).toContain('team=&lt;img src=x onerror=alert(1)&gt;');
  });

  it('draws one GPU cell per GPU: used, then free, then unhealthy, with the same in words', () => {
    const main = fleetPage({
      nodes: [node({ gpu_total: 8, gpu_free: 5, unhealthy_gpus: ['gpu 3: fell off the bus'] })],
      replicas: [],
      models: [],
      csrf: 't',
      now: new Date(0),
    }).main.value;
    const bar = /<div class="gpubar"[^>]*>(.*?)<\/div>/.exec(main)?.[1] ?? '';
    expect([...bar.matchAll(/class="(\w+)"/g)].map((m) => m[1])).toEqual(['used', 'used', 'free', 'free', 'free', 'free', 'free', 'sick']);
    expect(main).toContain('5 free of 8, 2 in use, 1 unhealthy');
  });

  it('groups the explanation by profile and pool, with notes', () => {
    const v: ExplainView = {
      model: 'm',
      placed: false,
      attempted: true,
      summary: '0/3 nodes can run m',
      notes: [{ profile: 'cpu', node: 'c', note: 'memory unknown (agent did not report it)' }],
      rejections: [
        { profile: 'gpu', pool: 'rack-a', node: 'a', code: 'memory', reason: 'has 8 GiB of memory, needs 24' },
        { profile: 'gpu', pool: 'rack-a', node: 'a', code: 'gpu_count', reason: 'has 0 free GPUs, needs 2' },
        { profile: 'gpu', pool: 'rack-b', node: 'b', code: 'cordoned', reason: 'is cordoned' },
      ],
    };
    const out = explanation(v).value;
    const order = [
      'profile gpu',
      'pool rack-a',
      'has 8 GiB of memory, needs 24<br>has 0 free GPUs',
      'pool rack-b',
      'is cordoned',
      'profile cpu',
      'memory unknown',
    ];
    let at = 0;
    for (const s of order) {
      const i = out.indexOf(s, at);
      expect(i).toBeGreaterThanOrEqual(at);
      at = i;
    }
  });

  it('inlines exactly the CSS and script the CSP allows, and no script where nothing refreshes', () => {
    const full = layout(fleetPage({ nodes: [], replicas: [], models: [], csrf: 't', now: new Date(0) }), { csrf: 't' }).value;
    expect(full).toContain(`<style>${CSS}</style>`);
    expect(full).toContain(`<script>${SCRIPT}</script>`);
    expect(full).toContain('<html lang="en">');
    expect(full).toContain('<a class="skip" href="#main">');
    expect(CSP).toContain("script-src 'sha256-");
    expect(CSP).not.toContain('unsafe-inline');
    const login = layout(loginPage({ next: '/' }), {}).value;
    expect(login).not.toContain('<script>');
    expect(login).not.toContain('/logout');
    expect(login).toMatch(/<label for="token">Admin token<\/label>\s*<input id="token" name="token" type="password"/);
  });

  it('warns on every page of a server started with --insecure-http, and only there', () => {
    const page = loginPage({ next: '/' });
    expect(layout(page, { insecureHttp: true }).value).toContain(`<p class="banner" role="alert">${INSECURE_BANNER}</p>`);
    expect(layout(page, {}).value).not.toContain('class="banner"');
  });
});

describe('sessions', () => {
  it('issues a signed value that is not the token, and refuses tampering, expiry and logout', () => {
    let now = 1_000_000;
    const s = new Sessions('secret-admin-token', () => now);
    const v = s.issue();
    expect(v).not.toContain('secret-admin-token');
    const sess = s.verify(v)!;
    expect(sess.expiresAtS).toBe(now + SESSION_TTL_S);
    expect(s.csrfOk(sess, sess.csrf)).toBe(true);
    expect(s.csrfOk(sess, `${sess.csrf}x`)).toBe(false);
    expect(s.csrfOk(sess, undefined)).toBe(false);

    const [ver, exp, nonce, mac] = v.split('.');
    expect(s.verify(`${ver}.${Number(exp) + 1000}.${nonce}.${mac}`)).toBeUndefined();
    expect(s.verify(`${v}x`)).toBeUndefined();
    expect(s.verify('')).toBeUndefined();
    // Another admin token, another key: changing the token logs everyone out.
    expect(new Sessions('other', () => now).verify(v)).toBeUndefined();
    // A second server with the same token accepts it: restarts keep operators logged in.
    expect(new Sessions('secret-admin-token', () => now).verify(v)).toBeDefined();

    s.revoke(sess);
    expect(s.verify(v)).toBeUndefined();
    const w = s.issue();
    now += SESSION_TTL_S;
    expect(s.verify(w)).toBeUndefined();
  });

  it('reads one cookie from a header', () => {
    expect(cookieValue('a=1; llmgw_session=v1.2.3.4; b=2', 'llmgw_session')).toBe('v1.2.3.4');
    expect(cookieValue('xllmgw_session=1', 'llmgw_session')).toBeUndefined();
    expect(cookieValue(undefined, 'llmgw_session')).toBeUndefined();
  });

  it('limits wrong logins per address, not globally', () => {
    let now = 0;
    const l = new LoginLimiter(3, 60_000, () => now);
    for (let i = 0; i < 3; i++) l.fail('1.1.1.1');
    expect(l.blockedFor('1.1.1.1')).toBe(60);
    expect(l.blockedFor('2.2.2.2')).toBe(0);
    now = 60_001;
    expect(l.blockedFor('1.1.1.1')).toBe(0);
  });
});

describe('sameOrigin', () => {
  const req = (h: Record<string, string>) => ({ get: (name: string) => h[name.toLowerCase()] }) as unknown as Request;
  it('passes our own pages and clients that send no browser headers, refuses other sites', () => {
    expect(sameOrigin(req({ host: '127.0.0.1:8081', origin: 'http://127.0.0.1:8081', 'sec-fetch-site': 'same-origin' }))).toBe(true);
    expect(sameOrigin(req({ host: '127.0.0.1:8081' }))).toBe(true);
    expect(sameOrigin(req({ host: '127.0.0.1:8081', origin: 'https://evil.example' }))).toBe(false);
    expect(sameOrigin(req({ host: '127.0.0.1:8081', origin: 'null' }))).toBe(false);
    expect(sameOrigin(req({ host: '127.0.0.1:8081', 'sec-fetch-site': 'same-site' }))).toBe(false);
    expect(sameOrigin(req({ host: 'internal:8081', 'x-forwarded-host': 'llmgw.example.com', origin: 'https://llmgw.example.com' }))).toBe(true);
  });
});
