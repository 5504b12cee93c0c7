import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ADMIN_TOKEN, adminFetch, bins, cleanup, ctl, eventually, removeTmp, rows, run, startServer, tmpDir } from './harness.js';

/**
 * Journey: an operator edits the catalog of a running server. A broken edit shows in
 * `ctl models` (a line above the table) and on the dashboard's Models page, every
 * problem with its line, within 5 s; fixing it clears both and the server logs what
 * changed. A server started on a broken catalog prints every problem and exits 2.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

const model = (name: string, engine = 'llama.cpp', extra = '') =>
  `  - {name: ${name}, source: org/${name}, profiles: [{name: cpu, engine: ${engine}${extra}}]}`;
// Two mistakes an operator makes: an engine typo and a misspelt key, on lines 3 and 4.
const BROKEN = `models:\n${model('chat')}\n${model('coder', 'node-lama-cpp')}\n${model('tiny', 'llama.cpp', ', min_memroy_gb: 1')}\n`;

describe('catalog feedback', () => {
  it('shows a broken live edit in ctl models and on the dashboard, and a fix clears it and logs the change', async () => {
    const dir = tmpDir('llmgw-catalog-');
    const file = path.join(dir, 'catalog.yaml');
    fs.writeFileSync(file, `models:\n${model('chat')}\n${model('coder')}\n`);
    const server = await startServer({ catalog: file });
    const url = server.adminUrl;

    const before = await ctl(url, ['models']);
    expect(before.code).toBe(0);
    expect(before.stdout).toMatch(/^NAME /);

    const login = await adminFetch(`${url}/login`, { method: 'POST', body: new URLSearchParams({ token: ADMIN_TOKEN }), redirect: 'manual' });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const modelsPage = async () => (await adminFetch(`${url}/models`, { headers: { cookie } })).text();
    expect(await modelsPage()).toContain('<h1>Models</h1>');

    const broken = Date.now();
    fs.writeFileSync(file, BROKEN);
    const shown = await eventually(
      async () => {
        const r = await ctl(url, ['models']);
        return r.stdout.startsWith('catalog reload failed') && r;
      },
      5000,
      'the failed reload in ctl models',
    );
    const lines = shown.stdout.split('\n');
    expect(lines[0]).toMatch(
      new RegExp(
        `^catalog reload failed \\d+s ago \\(\\d\\d:\\d\\d:\\d\\d UTC\\), still running the previous catalog: catalog ${file}: model "coder" \\(line 3\\): profiles\\[0\\]\\.engine must be one of .* \\(did you mean node-llama-cpp\\?\\) \\(\\+1 more: `,
      ),
    );
    // The table below is still the running catalog's.
    expect([...rows(lines.slice(1).join('\n')).keys()]).toEqual(['chat', 'coder']);
    const page = await eventually(
      async () => {
        const p = await modelsPage();
        return p.includes('Catalog reload failed') && p;
      },
      Math.max(0, 5000 - (Date.now() - broken)),
      'the failed reload on the dashboard',
    );
    expect(page).toContain(`model &quot;coder&quot; (line 3): profiles[0].engine must be one of`);
    expect(page).toContain(`model &quot;tiny&quot; (line 4): profiles[0].min_memroy_gb is not a known field (did you mean min_memory_gb?)`);
    expect(Date.now() - broken).toBeLessThan(5000);

    // The fix adds tiny and changes coder's engine: a good reload clears the line and says so.
    fs.writeFileSync(file, `models:\n${model('chat')}\n${model('coder', 'node-llama-cpp')}\n${model('tiny', 'llama.cpp', ', min_memory_gb: 1')}\n`);
    await server.waitFor(/catalog reloaded: \+1 model, 1 changed/, 5000);
    const fixed = await ctl(url, ['models']);
    expect(fixed.stdout).toMatch(/^NAME /);
    expect([...rows(fixed.stdout).keys()]).toEqual(['chat', 'coder', 'tiny']);
    expect(await modelsPage()).not.toContain('Catalog reload failed');
    await server.stop();
  });

  it('a server started on a broken catalog prints every problem and exits 2', async () => {
    const dir = tmpDir('llmgw-catalog-');
    const file = path.join(dir, 'catalog.yaml');
    fs.writeFileSync(file, BROKEN);
    const p = run(bins.server, ['--catalog', file, '--data-dir', path.join(dir, 'data'), '--admin-addr', '127.0.0.1:0', '--client-addr', '127.0.0.1:0']);
    const code = await new Promise<number | null>((resolve) => p.child.once('exit', (c) => resolve(c)));
    expect(code).toBe(2);
    expect(p.output().trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^llmgw-server: catalog ${file}: model "coder" \\(line 3\\): profiles\\[0\\]\\.engine must be one of .*\\(did you mean node-llama-cpp\\?\\)$`,
        ),
      ),
      `llmgw-server: catalog ${file}: model "tiny" (line 4): profiles[0].min_memroy_gb is not a known field (did you mean min_memory_gb?)`,
    ]);
  });
});
