import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import type { CatalogStatusView } from '@llmgw/shared';
import { CatalogWatcher, parseCatalog } from '../src/catalog/catalog.js';
import { startServer, type RunningServer } from '../src/server.js';
import { makeServerSettings, send } from './live-server.js';
import { tempDirs } from './temp-dirs.js';

// A real server over a real catalog file and its watcher: what GET /api/v1/catalog and
// the dashboard's models page say while a reload has failed, and after a good one.

const tempDir = tempDirs('llmgw-catalog-status-', afterEach);
const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const model = (name: string, engine = 'llama.cpp') => `  - {name: ${name}, source: org/${name}, profiles: [{name: cpu, engine: ${engine}}]}`;
const auth = { authorization: 'Bearer admin' };

async function setUp() {
  const dir = tempDir();
  const file = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(file, `models:\n${model('a')}\n`);
  const watcher = await CatalogWatcher.start(file, { onChange: () => undefined, onError: () => undefined, fsWatch: false, pollMs: 0 });
  stops.push(() => watcher.close());
  const running: RunningServer = await startServer(makeServerSettings(path.join(dir, 'data')), watcher.current, pino({ level: 'silent' }), {
    catalogStatus: watcher,
  });
  stops.push(() => running.close());
  const status = async () => JSON.parse((await send(running.adminUrl, { path: '/api/v1/catalog', headers: auth })).body) as CatalogStatusView;
  const login = await send(running.adminUrl, {
    method: 'POST',
    path: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'token=admin',
  });
  const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';
  const modelsPage = async () => (await send(running.adminUrl, { path: '/models', headers: { cookie } })).body;
  return { file, watcher, status, modelsPage };
}

describe('a failed catalog reload', () => {
  it('shows in GET /api/v1/catalog and on the models page until a good reload', async () => {
    const { file, watcher, status, modelsPage } = await setUp();
    expect(await status()).toEqual({ file, models: 1, loaded_at: expect.stringMatching(/^\d{4}-/) });
    expect(await modelsPage()).not.toContain('Catalog reload failed');

    fs.writeFileSync(file, `models:\n${model('a', 'node-lama-cpp')}\n${model('b', 'vlm')}\n`);
    await watcher.reload();
    const failed = await status();
    expect(failed.models).toBe(1);
    expect(failed.reload_error).toMatchObject({ age_s: 0, more: 0 });
    expect(failed.reload_error?.problems).toEqual([
      expect.objectContaining({
        model: 'a',
        field: 'models[0].profiles[0].engine',
        line: 2,
        message: expect.stringMatching(/\(did you mean node-llama-cpp\?\)$/),
      }),
      expect.objectContaining({ model: 'b', field: 'models[1].profiles[0].engine', line: 3, message: expect.stringMatching(/\(did you mean vllm\?\)$/) }),
    ]);
    const page = await modelsPage();
    expect(page).toContain('Catalog reload failed');
    expect(page).toContain(`catalog ${file}: model &quot;b&quot; (line 3): profiles[0].engine must be one of`);

    fs.writeFileSync(file, `models:\n${model('a')}\n${model('b')}\n`);
    await watcher.reload();
    expect(await status()).toEqual({ file, models: 2, loaded_at: expect.stringMatching(/^\d{4}-/) });
    expect(await modelsPage()).not.toContain('Catalog reload failed');
  });

  it('a server without --catalog says so', async () => {
    const dir = tempDir();
    const running = await startServer(makeServerSettings(dir), parseCatalog('models: []\n', '(none)'), pino({ level: 'silent' }));
    stops.push(() => running.close());
    const r = await send(running.adminUrl, { path: '/api/v1/catalog', headers: auth });
    expect(JSON.parse(r.body)).toEqual({ models: 0 });
  });
});
