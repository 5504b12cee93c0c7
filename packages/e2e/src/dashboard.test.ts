import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ExplainView, NodeView } from '@llmgw/shared';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import {
  ADMIN_TOKEN,
  adminFetch,
  cleanup,
  ctl,
  ctlJson,
  eventually,
  removeTmp,
  root,
  rows,
  startAgent,
  startServer,
  tmpDir,
  type ServerProc,
} from './harness.js';

/**
 * Journey: an operator opens the admin address in a browser, logs in with the admin
 * token, sees the fleet (memory `-` where an agent did not report it), finds out why a
 * model is not placed, and cordons and drains nodes from the page, which `ctl` then
 * shows. A forged POST changes nothing. Headless Debian Chromium, driven by
 * playwright-core; screenshots go to test-artifacts/ for a person to look at.
 */

const CHROMIUM = '/usr/bin/chromium';
const artifacts = path.join(root, 'packages/e2e/test-artifacts/dashboard');
const haveChromium = fs.existsSync(CHROMIUM);
// On a developer's machine a missing browser skips, loudly; in CI it must fail, or the
// dashboard would go untested without anyone noticing (.ci/run installs it).
const runBrowser = haveChromium || Boolean(process.env.CI);
if (!runBrowser) {
  console.log(`dashboard browser tests SKIPPED: ${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run installs it in CI)`);
}

// `chat` alone first: `coder` joins the catalog only after the memory-less node is
// cordoned, or it would be placed there (memory unknown fits, with a note) at once.
const chat = `
  - name: chat
    source: test
    profiles:
      - name: cpu
        engine: command
        command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]
        min_memory_gb: 1
        node_selector: { role: chat }
`;
const coder = `
  - name: coder
    aliases: [code]
    source: test
    fallbacks: [chat]
    profiles:
      - name: cpu
        engine: command
        command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"]
        min_memory_gb: 24
        node_selector: { role: coding }
`;

let server: ServerProc;
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
let url: string;
const consoleErrors: string[] = [];

afterAll(async () => {
  await browser?.close();
  await cleanup();
  removeTmp();
});

async function shoot(p: Page, name: string): Promise<void> {
  fs.mkdirSync(artifacts, { recursive: true });
  await p.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
}

async function nodeState(id: string): Promise<string> {
  const state = rows((await ctl(url, ['nodes'])).stdout).get(id)?.STATE;
  if (state === undefined) throw new Error(`ctl nodes shows no state for ${id}`);
  return state;
}

(runBrowser ? describe : describe.skip)('dashboard in a browser', () => {
  beforeAll(async () => {
    if (!haveChromium) throw new Error(`${CHROMIUM} is missing; CI must install Debian's chromium (see .ci/run)`);
    const file = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
    fs.writeFileSync(file, `models:${chat}`);
    server = await startServer({ catalog: file });
    url = server.adminUrl;
    startAgent({ server: url, nodeId: 'gpu-h100', nvidiaSmi: 'h100-lost-one', proc: 'h100', sys: 'ib', labels: 'role=training,zone=a' });
    startAgent({ server: url, nodeId: 'cpu-small', proc: 'cpu-8gb', labels: 'role=coding' });
    startAgent({ server: url, nodeId: 'old-agent', proc: 'no-memtotal', labels: 'role=coding' });
    [browser] = await Promise.all([
      chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        // No --user-data-dir: playwright gives every launch a new, empty profile of its own.
        // The networking flags keep Chromium from calling home on a closed network.
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      }),
      eventually(
        async () => {
          const ns = await ctlJson<NodeView[]>(url, ['nodes']);
          return ns.length === 3 && ns.every((n) => n.liveness === 'ready');
        },
        20_000,
        'three live nodes',
      ),
    ]);
    // The memory-less node fits on labels but memory is unknown; cordoned, it is out too.
    expect((await ctl(url, ['cordon', 'old-agent', '--reason', 'agent too old'])).code).toBe(0);
    fs.writeFileSync(file, `models:${coder}${chat}`);
    server.child.kill('SIGHUP');
    await eventually(
      async () => {
        const e = await ctlJson<ExplainView>(url, ['explain', 'coder']);
        return e.rejections.some((r) => r.node === 'old-agent' && r.code === 'cordoned');
      },
      15_000,
      'an explanation that sees the cordon',
    );
    await ctl(url, ['keys', 'create', '--name', 'team-web', '--rpm', '60']);
    // The admin listener serves TLS with the server's own CA, which this throwaway browser
    // profile does not hold; ctl, agents and adminFetch verify that CA, the browser need not.
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ignoreHTTPSErrors: true });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
  }, 45_000);

  it('sends a visitor without a session to the login page', async () => {
    const res = await adminFetch(`${url}/models`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/login?next=%2Fmodels');
    const frag = await adminFetch(`${url}/`, { headers: { 'x-fragment': 'main' }, redirect: 'manual' });
    expect(frag.status).toBe(401);
    // The admin API's own auth is unchanged: the dashboard is not a way around it.
    expect((await adminFetch(`${url}/api/v1/nodes`)).status).toBe(401);

    await page.goto(`${url}/models/coder`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await shoot(page, 'login');
  });

  it('logs in through the form and sets an HttpOnly session cookie that is not the token', async () => {
    await page.getByLabel('Admin token').fill('wrong-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('not the admin token');

    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${url}/models/coder`);
    const cookie = (await context.cookies()).find((c) => c.name === 'llmgw_session')!;
    // Secure, now that the admin listener is https by default (issue 12).
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: true });
    expect(cookie.value).not.toContain(ADMIN_TOKEN);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    expect(page.url()).not.toContain(ADMIN_TOKEN);
  });

  it('explains why the model is not placed, grouped by profile', async () => {
    const main = page.locator('main');
    await main.getByText('has 8 GiB of memory, needs 24').waitFor();
    const row = main.getByRole('row', { name: /cpu-small/ });
    expect(await row.textContent()).toContain('has 8 GiB of memory, needs 24');
    expect(await main.getByRole('row', { name: /old-agent/ }).textContent()).toContain('cordoned');
    expect(await main.getByRole('row', { name: /gpu-h100/ }).textContent()).toContain('role=coding');
    expect(await main.getByRole('heading', { name: 'profile cpu' }).count()).toBe(1);
    expect(await main.textContent()).toMatch(/0\/3 nodes can run coder/);
    await shoot(page, 'model-coder');

    await page.getByRole('link', { name: 'Models', exact: true }).click();
    await page.waitForURL(`${url}/models`);
    const coder = page.getByRole('row', { name: /coder/ });
    expect(await coder.textContent()).toMatch(/not placed/);
    expect(await coder.textContent()).toMatch(/0 \/ 1/);
    expect(await page.locator('main').getByRole('link', { name: 'coder' }).count()).toBeGreaterThanOrEqual(2);
    await shoot(page, 'models');
  });

  it('lists the nodes with GPUs and memory, `-` where the agent did not report it', async () => {
    await page.getByRole('link', { name: 'Fleet' }).click();
    await page.waitForURL(`${url}/`);
    const cell = (node: string, col: number) => page.locator(`#node-${node} > *`).nth(col).innerText();
    expect((await cell('cpu-small', 3)).trim()).toBe('0 / 8');
    expect((await cell('old-agent', 3)).trim()).toBe('-');
    expect(await cell('gpu-h100', 2)).toContain('7 free of 8, 1 unhealthy');
    expect(await cell('old-agent', 1)).toContain('cordoned');
    expect(await cell('old-agent', 1)).toContain('agent too old');
    expect(await cell('cpu-small', 4)).toContain('role=coding');
    expect(await page.locator('main').innerText()).toMatch(/gpu-h100: gpu 3: .*fell off the bus/);
    await shoot(page, 'fleet');
  });

  it('refuses a POST without the CSRF token or from another origin, and changes nothing', async () => {
    const before = await nodeState('gpu-h100');
    expect(before).toBe('ready');
    const noToken = await context.request.post(`${url}/nodes/gpu-h100/state`, { form: { action: 'cordon' }, maxRedirects: 0 });
    expect(noToken.status()).toBe(403);
    const csrf = await page.locator('#node-gpu-h100 input[name=csrf]').first().inputValue();
    const wrongToken = await context.request.post(`${url}/nodes/gpu-h100/state`, { form: { action: 'cordon', csrf: `${csrf}x` }, maxRedirects: 0 });
    expect(wrongToken.status()).toBe(403);
    const crossSite = await context.request.post(`${url}/nodes/gpu-h100/state`, {
      form: { action: 'cordon', csrf },
      headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      maxRedirects: 0,
    });
    expect(crossSite.status()).toBe(403);
    // Without a session the token alone is worth nothing.
    const noSession = await adminFetch(`${url}/nodes/gpu-h100/state`, {
      method: 'POST',
      body: new URLSearchParams({ action: 'cordon', csrf }),
      redirect: 'manual',
    });
    expect(noSession.status).toBe(303);
    expect(await nodeState('gpu-h100')).toBe('ready');
  });

  it('cordons and drains from the page, and ctl sees it', async () => {
    await page.getByRole('button', { name: 'Cordon gpu-h100', exact: true }).click();
    await page.getByRole('status').getByText('gpu-h100').waitFor();
    expect(await nodeState('gpu-h100')).toBe('cordoned');
    expect(await page.locator('#node-gpu-h100').innerText()).toContain('cordoned');

    // Drain takes a reason and a second, explicit click.
    await page.getByRole('link', { name: 'Drain cpu-small…' }).click();
    await page.waitForURL(`${url}/nodes/cpu-small/drain`);
    await page.getByLabel('Reason').fill('PSU swap, ticket 1234');
    await shoot(page, 'drain-confirm');
    expect(await nodeState('cpu-small')).toBe('ready');
    await page.getByRole('button', { name: 'Drain cpu-small' }).click();
    await page.waitForURL(/\/\?done=drain/);
    expect(await nodeState('cpu-small')).toBe('draining');
    const json = await ctlJson<NodeView[]>(url, ['nodes']);
    expect(json.find((n) => n.id === 'cpu-small')!.state_reason).toBe('PSU swap, ticket 1234');
  });

  it('refreshes <main> in place when the fleet changes', async () => {
    await page.getByRole('button', { name: 'Uncordon gpu-h100', exact: true }).waitFor({ timeout: 1000 });
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    expect((await ctl(url, ['uncordon', 'gpu-h100'])).code).toBe(0);
    await page.locator('#node-gpu-h100').getByRole('button', { name: 'Cordon gpu-h100', exact: true }).waitFor({ timeout: 8000 });
    // Same document: the page was not reloaded.
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
  });

  it('shows keys and usage', async () => {
    await page.getByRole('link', { name: 'Keys & usage' }).click();
    await page.waitForURL(`${url}/keys`);
    expect(await page.getByRole('row', { name: /team-web/ }).textContent()).toMatch(/active.*60/s);
    await shoot(page, 'keys');
  });

  it('fits a phone: tables scroll inside their wrapper, not the page', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${url}/`);
    await phone.locator('#node-gpu-h100').waitFor();
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shoot(phone, 'fleet-phone');
    await phone.close();
  });

  it('runs its inline CSS and script under the CSP, with nothing else failing to load', async () => {
    expect(consoleErrors.filter((e) => !/status of 40[13]/.test(e))).toEqual([]);
    const res = await adminFetch(`${url}/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'no route GET /nope', code: 'no_route' });
  });

  it('logs out, and the old cookie no longer opens anything', async () => {
    const old = (await context.cookies()).find((c) => c.name === 'llmgw_session')!.value;
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${url}/login`);
    const res = await adminFetch(`${url}/`, { headers: { cookie: `llmgw_session=${old}` }, redirect: 'manual' });
    expect(res.status).toBe(303);
  });
});
