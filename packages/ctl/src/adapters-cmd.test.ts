import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ModelView, ReplicaView } from '@llmgw/shared';

/** The built ctl, run as an operator runs it, against a stand-in admin API (issue 31: LoRA adapters). */
const CLI = new URL('../dist/cli.js', import.meta.url).pathname;

const base = {
  aliases: ['b'],
  source: '/m.gguf',
  min_replicas: 1,
  max_replicas: 1,
  ready_replicas: 1,
  total_replicas: 1,
  fallbacks: [],
  profiles: ['cpu'],
  routing: 'cache-aware',
};
const models: ModelView[] = [
  { ...base, name: 'base', adapters: [{ name: 'sql-lora', source: '/a/sql.gguf', loaded_on: ['r-1'] }] },
  { ...base, name: 'other', aliases: [] },
];
const replicas: ReplicaView[] = [{ id: 'r-1', model: 'base', profile: 'cpu', state: 'ready', age_seconds: 3, adapters: ['sql-lora'], shards: [] }];
const answers: Record<string, string> = {
  '/api/v1/models': JSON.stringify(models),
  '/api/v1/catalog': JSON.stringify({ models: 2 }),
  '/api/v1/replicas': JSON.stringify(replicas),
};
const server = http.createServer((req, res) => {
  const body = answers[req.url ?? ''];
  res.statusCode = body === undefined ? 404 : 200;
  res.setHeader('content-type', 'application/json').end(body ?? JSON.stringify({ error: `no route ${req.url}`, code: 'not_found' }));
});
let url = '';
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function ctl(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args, '--server', url, '--token', 't'],
      { env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent', NO_COLOR: '1' } },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}
const adapterLines = ['MODEL  ADAPTER   SOURCE       LOADED ON', 'base   sql-lora  /a/sql.gguf  r-1'];

describe('ctl models and LoRA adapters', () => {
  it('lists the adapters of the model asked for (by name or alias), under its table', async () => {
    for (const name of ['base', 'b']) {
      const r = await ctl('models', name);
      expect(r.code).toBe(0);
      const lines = r.stdout.trimEnd().split('\n');
      // Only that model's row in the table.
      expect(lines.some((l) => l.startsWith('other'))).toBe(false);
      expect(lines.slice(-2)).toEqual(adapterLines);
    }
  });

  it('lists every model with its adapters with -o wide, and only counts them without', async () => {
    const wide = (await ctl('models', '-o', 'wide')).stdout.trimEnd().split('\n');
    expect(wide.slice(-2)).toEqual(adapterLines);
    const plain = (await ctl('models')).stdout;
    expect(plain).toContain('ADAPTERS');
    expect(plain).not.toContain('sql-lora');
  });

  it('refuses a model the catalog does not have, exit 1', async () => {
    expect(await ctl('models', 'nope')).toEqual({ code: 1, stdout: '', stderr: 'error: model "nope" is not in the catalog (see ctl models)\n' });
  });

  it("shows each replica's loaded adapters with ctl replicas -o wide", async () => {
    const lines = (await ctl('replicas', '-o', 'wide')).stdout.split('\n');
    const col = lines[0]!.indexOf('ADAPTERS');
    expect(col).toBeGreaterThan(0);
    expect(lines[1]!.slice(col).split(/\s+/)[0]).toBe('sql-lora');
    expect((await ctl('replicas')).stdout).not.toContain('ADAPTERS');
  });
});
